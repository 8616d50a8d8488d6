"""``python -m privagg`` — the command line."""

from privagg.cli.main import main

if __name__ == "__main__":
    main()
