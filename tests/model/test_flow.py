from datetime import timedelta

from flowtide.model import Flow, NodeSettings, TimeoutAnchor


def flow() -> Flow:
    return Flow.model_validate(
        {
            "id": "urn:t:f",
            "entrypoints": {"main": "pay"},
            "node_types": [
                {"id": "urn:t:pay", "outputs": ["ok"], "settings": {"timeout_anchor": "node"}},
            ],
            "placements": [
                {
                    "id": "pay",
                    "kind": "task",
                    "node": "urn:t:pay",
                    "settings": {"timeout": "PT10M"},
                    "routes": {"ok": "each"},
                },
                {
                    "id": "each",
                    "kind": "scatter",
                    "source": "items",
                    "body": {"node": "urn:t:pay"},
                    "routes": {"all-success": "end"},
                },
                {"id": "end", "kind": "terminal"},
            ],
        }
    )


def test_settings_at_layers_defaults_node_type_and_placement() -> None:
    f = flow()
    defaults = NodeSettings(timeout="PT1M", timeout_anchor="park", release_on=("ok",))
    settings = f.settings_at(f.placement("pay"), defaults=defaults)
    assert settings.timeout == timedelta(minutes=10)  # the placement's
    assert settings.anchor is TimeoutAnchor.NODE  # the node type's
    assert settings.release_on == ("ok",)  # the implementation's default


def test_settings_at_applies_the_scatter_body_node_type() -> None:
    f = flow()
    assert f.settings_at(f.placement("each")).anchor is TimeoutAnchor.NODE
    assert f.settings_at(f.placement("end")) == NodeSettings()


def test_version_given_as_a_number_is_text() -> None:
    data = flow().to_data()
    data["version"] = 3
    assert Flow.model_validate(data).version == "3"


def test_the_flow_schema_asks_a_scatter_for_exactly_one_source() -> None:
    import jsonschema

    from flowtide.model import flow_schema

    validator = jsonschema.Draft202012Validator(flow_schema())
    scatter = {"id": "each", "kind": "scatter", "source": "items", "body": {"node": "urn:t:n"}}
    data = {
        "id": "urn:t:f",
        "entrypoints": {"main": "each"},
        "placements": [scatter, {"id": "end", "kind": "terminal"}],
    }
    assert list(validator.iter_errors(data)) == []
    scatter["source_fn"] = "shop.items:all"
    assert list(validator.iter_errors(data)) != []  # both
    del scatter["source"]
    assert list(validator.iter_errors(data)) == []  # the function only
    del scatter["source_fn"]
    assert list(validator.iter_errors(data)) != []  # neither
