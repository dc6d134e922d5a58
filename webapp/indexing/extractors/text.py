"""Plain text, source code and configuration files: encoding detection and line counts."""

from __future__ import annotations

import os

from . import markdown
from ._util import clean_str, decode_text, read_text_bytes
from .base import Extracted, ExtractionSettings, ExtractorSpec

TEXT_EXTENSIONS = (
    "txt",
    "text",
    "log",
    "nfo",
    "readme",
    "asc",
    "me",
    "lst",
    "out",
    "diz",
    "1st",
    "csv",
    "tsv",
)
CODE_EXTENSIONS = (
    "py",
    "pyw",
    "pyi",
    "js",
    "mjs",
    "cjs",
    "jsx",
    "ts",
    "tsx",
    "go",
    "rs",
    "java",
    "kt",
    "kts",
    "scala",
    "groovy",
    "gradle",
    "c",
    "h",
    "cc",
    "cpp",
    "cxx",
    "hpp",
    "hh",
    "hxx",
    "cs",
    "m",
    "mm",
    "swift",
    "rb",
    "php",
    "pl",
    "pm",
    "lua",
    "r",
    "jl",
    "dart",
    "ex",
    "exs",
    "erl",
    "hrl",
    "hs",
    "ml",
    "mli",
    "fs",
    "fsx",
    "clj",
    "cljs",
    "lisp",
    "el",
    "scm",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "psm1",
    "bat",
    "cmd",
    "sql",
    "vue",
    "svelte",
    "css",
    "scss",
    "sass",
    "less",
    "html",
    "htm",
    "xhtml",
    "asm",
    "s",
    "f",
    "f90",
    "pas",
    "vb",
    "vbs",
    "zig",
    "nim",
    "v",
    "tcl",
    "awk",
    "sed",
    "proto",
    "graphql",
    "gql",
    "tf",
    "hcl",
    "nix",
    "cmake",
    "mk",
    "ipynb",
)
CONFIG_EXTENSIONS = (
    "yaml",
    "yml",
    "toml",
    "json",
    "jsonc",
    "json5",
    "ini",
    "cfg",
    "conf",
    "config",
    "xml",
    "env",
    "properties",
    "plist",
    "xsd",
    "xsl",
    "xslt",
    "svg",
    "rss",
    "atom",
    "lock",
    "editorconfig",
    "service",
    "desktop",
    "reg",
    "htaccess",
)
CONFIG_FILENAMES = (
    ".env",
    ".coveragerc",
    ".editorconfig",
    ".gitignore",
    ".gitattributes",
    ".gitmodules",
    ".gitconfig",
    ".npmrc",
    ".yarnrc",
    ".pylintrc",
    ".flake8",
    ".babelrc",
    ".eslintrc",
    ".prettierrc",
    ".dockerignore",
    ".htaccess",
    ".bashrc",
    ".zshrc",
    ".profile",
    ".vimrc",
    ".inputrc",
    ".tmux.conf",
    ".condarc",
    ".pypirc",
    "pipfile",
    "procfile",
    "requirements.txt",
)
CODE_FILENAMES = ("makefile", "dockerfile", "containerfile", "jenkinsfile", "rakefile", "gemfile")


def _read_text(path: str, settings: ExtractionSettings, doc_type: str) -> Extracted:
    data, cut = read_text_bytes(path, settings)
    text, encoding = decode_text(data)
    text = clean_str(text)
    metadata: dict = {"encoding": encoding, "line_count": _line_count(text)}
    if cut:
        metadata["truncated"] = True
    return Extracted(type=doc_type, content=text, metadata=metadata)


def _line_count(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def extract_text(path: str, settings: ExtractionSettings) -> Extracted:
    """Plain text; a .txt file that starts with front matter is treated as markdown."""
    doc = _read_text(path, settings, "text")
    if markdown.has_front_matter(doc.content):
        return markdown.from_text(doc.content, doc.metadata, settings)
    return doc


def extract_code(path: str, settings: ExtractionSettings) -> Extracted:
    """Source code as text, with the language taken from the extension."""
    doc = _read_text(path, settings, "code")
    name = os.path.basename(path).lower()
    doc.metadata["language"] = name.rsplit(".", 1)[-1] if "." in name else name
    return doc


def extract_config(path: str, settings: ExtractionSettings) -> Extracted:
    """Configuration files as text (never parsed, so entity bombs stay inert)."""
    doc = _read_text(path, settings, "config")
    name = os.path.basename(path).lower()
    doc.metadata["format"] = name.rsplit(".", 1)[-1] if "." in name.lstrip(".") else name
    return doc


TEXT = ExtractorSpec(
    type="text",
    extract=extract_text,
    extensions=TEXT_EXTENSIONS,
    heavy_modules=("charset_normalizer", "yaml"),
)
CODE = ExtractorSpec(
    type="code",
    extract=extract_code,
    extensions=CODE_EXTENSIONS,
    filenames=CODE_FILENAMES,
)
CONFIG = ExtractorSpec(
    type="config",
    extract=extract_config,
    extensions=CONFIG_EXTENSIONS,
    filenames=CONFIG_FILENAMES,
)
