#!/usr/bin/python3
"""Renders chat templates with Python's jinja2 exactly as Hugging Face transformers does.

The second oracle for the C++ renderer (tests/chat/oracle_test.cpp). Settings follow
../shared/testdata/templates/README.md: ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, loopcontrols and HF's {% generation %} tag, HF's tojson, raise_exception and
strftime_now fixed at 2025-01-15 10:30:00. Reads a JSON job, writes JSON results:

  job:    {"templates": [{"name", "source", "bos_token", "eos_token"}],
           "cases": [{"name", "messages", "tools", "add_generation_prompt", "extra"?}],
           "mutable_sandbox": false}
  result: {"<template>": {"<case>": {"ok": true, "text": ...} |
                                    {"ok": false, "error_type": ..., "error_message": ...}}}

Usage: jinja_oracle.py JOB.json OUT.json   (run with /usr/bin/python3 and python3-jinja2)
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders its body, as in HF's AssistantTracker."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_generation_support")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


FIXED_NOW = datetime.datetime(2025, 1, 15, 10, 30, 0)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


def make_env(mutable):
    cls = jinja2.sandbox.SandboxedEnvironment if mutable else \
        jinja2.sandbox.ImmutableSandboxedEnvironment
    env = cls(trim_blocks=True, lstrip_blocks=True,
              extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    env = make_env(job.get("mutable_sandbox", False))
    results = {}
    for tpl in job["templates"]:
        out = results.setdefault(tpl["name"], {})
        try:
            template = env.from_string(tpl["source"])
        except Exception as e:  # a compile error fails every case
            for case in job["cases"]:
                out[case["name"]] = {"ok": False, "error_type": type(e).__name__,
                                     "error_message": str(e)}
            continue
        for case in job["cases"]:
            variables = {
                "messages": case["messages"],
                "tools": case.get("tools"),
                "documents": None,
                "add_generation_prompt": case.get("add_generation_prompt", True),
                "bos_token": tpl["bos_token"],
                "eos_token": tpl["eos_token"],
            }
            variables.update(case.get("extra", {}))
            try:
                out[case["name"]] = {"ok": True, "text": template.render(**variables)}
            except Exception as e:
                out[case["name"]] = {"ok": False, "error_type": type(e).__name__,
                                     "error_message": str(e)}
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
