"""Pictures of flows: Mermaid flowcharts."""

from flowtide.render.mermaid import effective_settings, mermaid_id, render_mermaid

__all__ = ["effective_settings", "mermaid_id", "render_mermaid"]
