#!/usr/bin/python3
"""Validate JSON documents against a memplan JSON Schema.

Usage: validate_json.py SCHEMA FILE [FILE...]

Prints "ok FILE" for each valid file. For an invalid file prints
"FILE: POINTER: MESSAGE" (the first error, JSON pointer into the document).
Exit status: 0 all valid, 1 some file invalid, 2 bad usage or unreadable
input (missing file, malformed JSON, invalid schema).

Needs the jsonschema package (Debian: python3-jsonschema; run with /usr/bin/python3).
"""
import json
import sys

try:
    import jsonschema
    from jsonschema import validators
except ImportError:  # pragma: no cover
    sys.stderr.write("validate_json.py: the jsonschema module is missing "
                     "(apt-get install python3-jsonschema; run with /usr/bin/python3)\n")
    sys.exit(2)


def json_pointer(path):
    """RFC 6901 pointer for a sequence of keys/indices ("" is the whole document)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _reject_constant(name):
    raise ValueError("invalid JSON constant %s" % name)


def load_json(path):
    with open(path, "r", encoding="utf-8") as f:
        # NaN / Infinity are not JSON; reject them like a strict parser would.
        return json.load(f, parse_constant=_reject_constant)


def make_validator(schema):
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def first_error(validator, instance):
    """The most relevant error (jsonschema.exceptions.best_match), or None."""
    return jsonschema.exceptions.best_match(validator.iter_errors(instance))


def format_error(err):
    msg = err.message
    if len(msg) > 300:
        msg = msg[:300] + "..."
    pointer = json_pointer(err.absolute_path) or "/"
    schema_ptr = json_pointer(err.absolute_schema_path)
    return "%s: %s (schema %s)" % (pointer, msg, schema_ptr or "/")


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: validate_json.py SCHEMA FILE [FILE...]\n")
        return 2
    schema_path = argv[1]
    try:
        schema = load_json(schema_path)
        validator = make_validator(schema)
    except (OSError, ValueError) as e:
        sys.stderr.write("%s: cannot read schema: %s\n" % (schema_path, e))
        return 2
    except jsonschema.exceptions.SchemaError as e:
        sys.stderr.write("%s: invalid schema: %s\n" % (schema_path, e.message))
        return 2

    status = 0
    for path in argv[2:]:
        try:
            doc = load_json(path)
        except (OSError, ValueError) as e:
            sys.stderr.write("%s: cannot read: %s\n" % (path, e))
            status = 2
            continue
        err = first_error(validator, doc)
        if err is None:
            print("ok %s" % path)
        else:
            print("%s: %s" % (path, format_error(err)))
            status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
