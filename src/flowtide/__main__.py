"""``python -m flowtide``: the ``flowtide`` command."""

from flowtide.cli import main

if __name__ == "__main__":
    main()
