"""``python -m xlaprof``."""

from xlaprof.cli import main

if __name__ == "__main__":
    main(prog_name="xlaprof")
