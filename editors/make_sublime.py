#!/usr/bin/env python3
"""Writes editors/sublime/shmap.tmLanguage, the TextMate grammar of
editors/vscode/syntaxes/shmap.tmLanguage.json as the XML property list Sublime Text (and
TextMate itself) load. `--check` exits 1 if the file is not what this would write (CTest
editors.grammars runs it so the two cannot drift apart)."""
import json
import os
import plistlib
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "vscode", "syntaxes", "shmap.tmLanguage.json")
TARGET = os.path.join(HERE, "sublime", "shmap.tmLanguage")


def plist():
    grammar = json.load(open(SOURCE))
    grammar.pop("$schema", None)
    return plistlib.dumps(grammar, sort_keys=True)


def main():
    want = plist()
    if "--check" in sys.argv[1:]:
        have = open(TARGET, "rb").read() if os.path.exists(TARGET) else b""
        if have != want:
            print("%s is out of date: run python3 editors/make_sublime.py" % os.path.relpath(TARGET))
            return 1
        return 0
    with open(TARGET, "wb") as f:
        f.write(want)
    return 0


if __name__ == "__main__":
    sys.exit(main())
