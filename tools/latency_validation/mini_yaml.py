"""A reader for the small YAML subset inference-perf writes as results/config.yaml.

Block mappings, block lists of mappings or scalars, and plain scalars (null, true/false,
integers, floats, strings, `[]`, `{}`) — enough for the dumped pydantic config, so the harness
needs no PyYAML (not among the project's dependencies). Anything else is an error naming the
file and line.
"""

import json
import re


class YamlError(ValueError):
    pass


def _scalar(text):
    if text in ("null", "~", ""):
        return None
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    if text == "[]":
        return []
    if text == "{}":
        return {}
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", text):
        return float(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def key_line(text, keys):
    """Line of the nested key path in a pretty-printed JSON or YAML document: each key is
    looked for after its parent (an integer list index i takes the next key's (i+1)-th
    occurrence); a missing key gives its deepest parent's line (1 if none)."""
    pos, line, skip = 0, 1, 0
    for k in keys:
        if isinstance(k, int):
            skip = k
            continue
        pattern = re.compile(r'(^|[{,\s])"?' + re.escape(k) + r'"?\s*:', re.M)
        for _ in range(skip + 1):
            m = pattern.search(text, pos)
            if not m:
                return line
            pos = m.end()
        skip = 0
        line = text.count("\n", 0, m.start() + len(m.group(1))) + 1
    return line


def load(path):
    """Parses PATH; returns nested dicts/lists/scalars. A flow document ('{...}', as the
    runs' profile.yaml files are) is JSON, itself YAML."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise YamlError(f"{path}:{e.lineno}: field 'document': {e.msg}") from None
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlError(f"{path}:{number}: field 'indent': tab in indentation")
        lines.append((number, len(raw) - len(raw.lstrip(" ")), raw.strip()))
    value, end = _block(path, lines, 0, lines[0][1] if lines else 0)
    if end != len(lines):
        raise YamlError(f"{path}:{lines[end][0]}: field 'indent': unexpected indentation")
    return value


def _block(path, lines, i, indent):
    if i < len(lines) and lines[i][2].startswith("- "):
        return _list(path, lines, i, indent)
    return _mapping(path, lines, i, indent)


def _list(path, lines, i, indent):
    out = []
    while i < len(lines) and lines[i][1] == indent and lines[i][2].startswith("- "):
        number, _, text = lines[i]
        rest = text[2:].strip()
        if ":" in rest and not rest.startswith(("'", '"')):
            # "- key: value" opens a mapping whose keys sit two columns further in.
            inner = [(number, indent + 2, rest)] + lines[i + 1 :]
            item, used = _mapping(path, inner, 0, indent + 2)
            out.append(item)
            i += used
        else:
            out.append(_scalar(rest))
            i += 1
    return out, i


def _mapping(path, lines, i, indent):
    out = {}
    while i < len(lines) and lines[i][1] == indent:
        number, _, text = lines[i]
        key, sep, rest = text.partition(":")
        if not sep or text.startswith("- "):
            raise YamlError(f"{path}:{number}: field '{key.strip()}': expected 'key: value'")
        key, rest = key.strip(), rest.strip()
        i += 1
        if rest:
            out[key] = _scalar(rest)
        elif i < len(lines) and (lines[i][1] > indent or
                                 (lines[i][1] == indent and lines[i][2].startswith("- "))):
            out[key], i = _block(path, lines, i, lines[i][1])
        else:
            out[key] = None
    if i < len(lines) and lines[i][1] > indent:
        raise YamlError(f"{path}:{lines[i][0]}: field 'indent': unexpected indentation")
    return out, i
