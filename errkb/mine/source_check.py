"""Source checks: what a record names must exist in the project's source (on demand, not at ingest).

S401 env var not in source, S402 CLI flag not in source, S403 a literal part of
errorMessage that the raise's format code cannot produce (only what can be shown:
a float formatted with a fixed precision ``{x:.1f}`` never prints more decimals).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from errkb.errors import ErrkbError
from errkb.mine.raise_sites import sites_in_source
from errkb.mine.sources import SourceTree

CODES = {
    "S401": "env-var-not-in-source",
    "S402": "cli-flag-not-in-source",
    "S403": "message-literal-not-producible",
}

ENV_PREFIXES = ("VLLM_", "TORCH_", "NCCL_", "CUDA_", "PYTORCH_", "FLASHINFER_")
_ENV = re.compile(r"\b((?:" + "|".join(ENV_PREFIXES) + r")[A-Z0-9_]*[A-Z0-9])\b")
# Which project's source defines a prefix: a PyTorch record's fix may name a vLLM variable,
# which PyTorch's source never mentions. NCCL_* and CUDA_* belong to native libraries.
PREFIX_OWNER = {"VLLM_": "vllm-project/vllm", "FLASHINFER_": "flashinfer-ai/flashinfer",
                "TORCH_": "pytorch/pytorch", "PYTORCH_": "pytorch/pytorch"}
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)+|[a-z][a-z0-9]{2,})\b")
_FIXED = re.compile(r"\.(\d+)[fF%]$")


class SourceUnreadable(ErrkbError):
    pass


@dataclass
class SourceFinding:
    code: str
    record_id: str | None
    message: str

    @property
    def name(self) -> str:
        return CODES[self.code]

    def __str__(self) -> str:
        return f"{self.code} {self.name} [{self.record_id}] {self.message}"

    def as_dict(self) -> dict:
        return {"code": self.code, "name": self.name, "record_id": self.record_id, "message": self.message}


def _texts(record: dict) -> str:
    sols = record.get("solutions") or []
    parts = [s if isinstance(s, str) else str(s) for s in sols]
    parts.append(str(record.get("exampleFix") or ""))
    return "\n".join(parts)


def names_in(record: dict) -> tuple[list[str], list[str]]:
    """(env var names, CLI flags without the dashes) the record's solutions and exampleFix name."""
    text = _texts(record)
    envs = sorted(set(_ENV.findall(text)))
    flags = sorted(set(_FLAG.findall(text)))
    return envs, flags


def _flag_in(flag: str, corpus: str) -> bool:
    field = flag.replace("-", "_")
    return f"--{flag}" in corpus or re.search(r"\b" + re.escape(field) + r"\s*:", corpus) is not None


def _fixed_precision_problem(record: dict, tree: SourceTree) -> str | None:
    text = tree.read_text(record.get("filePath") or "")
    if text is None:
        return None
    try:
        sites = sites_in_source(text, record["filePath"])
    except (SyntaxError, ValueError):
        return None
    line = record.get("lineNumber")
    message = record.get("errorMessage") or ""
    site = next((s for s in sites if s.line <= (line or 0) <= s.end_line and s.template), None)
    if site is None:
        # The release's lines differ from the analysed commit's: the one raise in the file
        # whose template matches the whole message is the record's raise.
        fitting = [s for s in sites if s.template is not None and s.template.fullmatches(message)]
        site = fitting[0] if len(fitting) == 1 else None
    if site is None or site.template is None:
        return None
    parts = site.template.parts
    for i, part in enumerate(parts):
        if isinstance(part, str):
            continue
        m = _FIXED.search(part.format_spec.strip())
        if not m:
            continue
        digits = int(m.group(1))
        before = parts[i - 1] if i > 0 and isinstance(parts[i - 1], str) else None
        if not before or before not in message:
            continue
        start = message.index(before) + len(before)
        num = re.match(r"-?\d+(?:\.(\d+))?", message[start:])
        if num and len(num.group(1) or "") != digits:
            return (f"errorMessage has {num.group(0)!r} after {before.strip()!r} but {site.file}:{site.line} formats "
                    f"{{{part.expr}:{part.format_spec}}} with {digits} decimal(s)")
    return None


def check_records(records: Iterable[dict], source: str | Path) -> list[SourceFinding]:
    """Findings for ``records`` against one source tree (checkout, package folder, wheel or sdist)."""
    try:
        tree = SourceTree.open(Path(source).resolve())
        corpus = "\n".join(text for _, text in tree.python_files())
    except (OSError, ValueError) as e:
        raise SourceUnreadable(f"cannot read source: {e}", where=str(source)) from None
    if not corpus:
        raise SourceUnreadable("no .py files in the source", where=str(source))
    findings: list[SourceFinding] = []
    for record in records:
        rid = record.get("id")
        envs, flags = names_in(record)
        for env in envs:
            owner = next((o for p, o in PREFIX_OWNER.items() if env.startswith(p)), None)
            if owner is None or (record.get("repo") and owner != record.get("repo")):
                continue
            if env not in corpus:
                findings.append(SourceFinding("S401", rid, f"{env} is named in the fix but no .py file of the source mentions it"))
        for flag in flags:
            if not _flag_in(flag, corpus):
                findings.append(SourceFinding("S402", rid, f"--{flag} is named in the fix but the source has neither "
                                                           f"'--{flag}' nor a field {flag.replace('-', '_')}"))
        problem = _fixed_precision_problem(record, tree)
        if problem:
            findings.append(SourceFinding("S403", rid, problem))
    return findings
