"""Structured output against an independent validator: headroom serve answers requests with
several JSON schemas at temperature 1 (so sampling explores), and every answer must parse and
validate under python3-jsonschema (Draft 2020-12, with its format checker). Every schema bounds
its documents (string lengths, item counts, integer ranges; the grammar bounds whitespace), so
max_tokens is never what ends an answer: finish_reason must be "stop".

Usage: structured_output_test.py HEADROOM_BINARY"""
import json
import sys
import urllib.request

import jsonschema

from serve import headroom_server

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "id": {"type": "string", "format": "uuid"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1, "maxItems": 3},
        },
        "required": ["name", "age", "tags", "id"],
        "additionalProperties": False,
    },
    "event": {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 30},
            "date": {"type": "string", "format": "date"},
            "kind": {"enum": ["meeting", "party", "trip"]},
            "version": {"const": 2},
            "cost": {"type": ["integer", "null"], "minimum": -1000, "maximum": 1000},
        },
        "required": ["title", "date", "kind", "version", "cost"],
        "additionalProperties": False,
    },
    "tree": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "pattern": "^[a-z]{1,6}$"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/leaf"}, "maxItems": 2},
                },
                "required": ["label", "children"],
                "additionalProperties": False,
            },
            "leaf": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                     "additionalProperties": False},
        },
        "$ref": "#/$defs/node",
    },
    "list": {
        "type": "array",
        "items": {"anyOf": [{"type": "integer", "minimum": -5, "maximum": 5}, {"type": "string", "maxLength": 4}]},
        "minItems": 2,
        "maxItems": 4,
    },
}
SEEDS = range(4)


def ask(url, schema, seed):
    body = {
        "messages": [{"role": "user", "content": "Answer in JSON."}],
        "max_tokens": 1000,
        "temperature": 1.0,
        "seed": seed,
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema, "strict": True}},
    }
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


failures = 0
with headroom_server(sys.argv[1], "--slots", "4") as url:
    for name, schema in SCHEMAS.items():
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
        for seed in SEEDS:
            answer = ask(url, schema, seed)
            choice = answer["choices"][0]
            text = choice["message"]["content"]
            try:
                if choice["finish_reason"] != "stop":
                    raise ValueError(f"finish_reason {choice['finish_reason']}: the document was not finished")
                validator.validate(json.loads(text))
                print(f"ok   {name} seed {seed}: {text}")
            except (ValueError, jsonschema.ValidationError) as e:
                failures += 1
                print(f"FAIL {name} seed {seed}: {text!r}: {e}")
print(f"{len(SCHEMAS) * len(SEEDS) - failures}/{len(SCHEMAS) * len(SEEDS)} answers valid")
sys.exit(1 if failures else 0)
