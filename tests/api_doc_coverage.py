#!/usr/bin/env python3
"""docs/api.md names every public declaration of the installed headers.

usage: api_doc_coverage.py INCLUDE_DIR/oneinfer DOC.md
Collects, from each header: macros, classes, structs, enums and their enumerators, aliases, the
public fields of structs, and every function or member function declared outside a private
section; each must appear in the doc as a whole word. Prints what is missing and exits 1.
"""
import pathlib
import re
import sys

hdr_dir, doc_path = pathlib.Path(sys.argv[1]), sys.argv[2]
doc = open(doc_path, encoding="utf-8").read()

names = {}  # name -> where
for hdr in sorted(hdr_dir.glob("*.h")):
    text = re.sub(r"//[^\n]*", "", hdr.read_text(encoding="utf-8"))
    for m in re.finditer(r"^\s*#\s*define\s+(\w+)", text, re.M):
        names.setdefault(m.group(1), hdr.name)
    private = False  # inside a private: section of the current class
    enum_body = False
    for raw in text.splitlines():
        line = raw.strip()
        if re.match(r"(public|protected):", line):
            private = False
        elif line.startswith("private:"):
            private = True
        elif line == "};":
            private = False  # a class ended (nested ones are followed by their parent's label)
        m = re.match(r"(?:class|struct)\s+(?:ONEINFER_API\s+)?(\w+)\s*(?:[:{]|final)", line)
        if m:
            names.setdefault(m.group(1), hdr.name)
            private = line.startswith("class")  # until its public: label
            continue
        m = re.match(r"enum class (\w+)[^{]*(\{?)(.*)", line)
        if m or enum_body:
            if m:
                names.setdefault(m.group(1), hdr.name)
                line = m.group(3)
            for e in re.findall(r"\b(k\w+)\s*(?=[=,}]|$)", line):
                names.setdefault(e, hdr.name)
            enum_body = "}" not in line
            continue
        if private or line.startswith(("#", "return", "for", "if", "}", "{")):
            continue
        m = re.match(r"using (\w+)\s*=", line)
        if m:
            names.setdefault(m.group(1), hdr.name)
            continue
        # A function or member function: the identifier before the first '(' of a declaration.
        m = re.match(r"(?:[\w:<>,*&\s]+?\s)?[*&]?~?(\w+)\s*\(", line)
        if m and not line.startswith(("using", "friend")) and m.group(1) not in ("explicit", "operator"):
            names.setdefault(m.group(1), hdr.name)
            continue
        # A public field: TYPE NAME [= value];
        m = re.match(r"[\w:<>,\s]+?\s(\w+)\s*(?:=[^;]*)?;$", line)
        if m and not m.group(1).endswith("_"):
            names.setdefault(m.group(1), hdr.name)

missing = sorted(n for n in names if not re.search(r"(?<![\w])" + re.escape(n) + r"(?![\w])", doc))
if missing:
    print("docs/api.md does not mention:", ", ".join(f"{n} ({names[n]})" for n in missing))
    sys.exit(1)
print(f"  docs/api.md names all {len(names)} public declarations")
