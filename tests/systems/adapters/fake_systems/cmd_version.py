"""A ``version_argv`` command: ``json`` prints versions as JSON, ``text`` a plain line, ``fail`` exits 5."""

import json
import sys

kind = sys.argv[1]
if kind == "json":
    print(
        json.dumps(
            {
                "index_version": "idx-42",
                "chunker_version": "chunker-9",
                "embedding_model": "mini-embed",
                "prompt_template_version": "tpl-3",
                "mode": "hybrid",
                "build": "2024-05-01",
                "extra": {"ignored": True},
            }
        )
    )
elif kind == "text":
    print("fake-search 1.4.2 (build abc123)\nsecond line is ignored")
else:
    sys.stderr.write("version: cannot open index\n")
    sys.exit(5)
