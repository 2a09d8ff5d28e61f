"""Input documents whose errors name the file, the line and the field (the project's rule for
bad input: one line, non-zero exit)."""

import json

import mini_yaml


class RunError(ValueError):
    """Bad or unsupported run input; the message is one line naming file, line and field."""


class Document:
    """A YAML (mini_yaml subset) or JSON file, read once, with located lookups."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path, encoding="utf-8") as f:
                self.text = f.read()
            self.data = (json.loads(self.text) if path.endswith(".json")
                         else mini_yaml.load(path))
        except OSError as e:
            raise RunError(f"{path}:1: field 'file': {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise RunError(f"{path}:{e.lineno}: field 'document': {e.msg}") from None
        except mini_yaml.YamlError as e:
            raise RunError(str(e)) from None

    def error(self, keys, problem):
        line = mini_yaml.key_line(self.text, keys)
        name = ".".join(f"[{k}]" if isinstance(k, int) else k for k in keys).replace(".[", "[")
        return RunError(f"{self.path}:{line}: field '{name}': {problem}")

    def get(self, *keys, default=KeyError):
        d = self.data
        for i, k in enumerate(keys):
            ok = (isinstance(d, dict) and k in d) or (
                isinstance(d, list) and isinstance(k, int) and 0 <= k < len(d))
            if not ok:
                if default is not KeyError:
                    return default
                raise self.error(keys[: i + 1], "missing")
            d = d[k]
        return d

    def number(self, *keys, integer=False, positive=True):
        v = self.get(*keys)
        kinds = (int,) if integer else (int, float)
        if isinstance(v, bool) or not isinstance(v, kinds) or (positive and not v > 0) \
                or v != v:
            kind = "integer" if integer else "number"
            raise self.error(keys, f"expected a {'positive ' if positive else ''}{kind} "
                                   f"(got {v!r})")
        return v
