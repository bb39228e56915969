"""`python app.py` = `alaya-studio serve`: the studio on http://127.0.0.1:7860."""

import sys

from studio.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
