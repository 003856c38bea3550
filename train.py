"""python train.py recipe=NAME [overlay=FILE ...] [key=value | +key=value | ~key ...]"""

import sys

from zoo.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
