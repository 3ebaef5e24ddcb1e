#!/usr/bin/env python3
"""embed_text: writes a C header defining `static const char NAME[]` with the text of a
file (the HTML report's viewer script), so the script lives in its own .js file and the
report stays one self-contained HTML page. Usage: embed_text.py NAME IN OUT."""
import sys


def main():
    name, src, dst = sys.argv[1:4]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    lines = ["/* Generated from %s by reporter/embed_text.py: do not edit. */" % src.split("/")[-1],
             "static const char %s[] =" % name]
    for line in text.splitlines(True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        esc = esc.replace("?", "\\?")   # no trigraphs
        lines.append('\t"%s"' % esc)
    lines[-1] += ";"
    with open(dst, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
