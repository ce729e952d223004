"""One ``sources:`` entry of the recipe: a name, a weight and where the text comes from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..config import ConfigError, is_path_name, require

SOURCE_TYPES = ("hf", "local", "warc", "demo")
DEMO_DOMAINS = ("web_en", "code", "math", "academic", "zh")
LOCAL_FORMATS = ("auto", "jsonl", "parquet", "text", "html")
WARC_FORMATS = ("auto", "warc", "wet")  # auto: response records as HTML and WET conversion records as text

# Keys that only make sense for one source type; setting them on another type is a mistake.
_TYPE_KEYS = {
    "hf": {"path", "config_name", "data_dir", "split", "data_files", "revision", "text_field", "id_field", "url_field",
           "shuffle_buffer", "max_retries", "retry_backoff_s", "fmt"},
    "local": {"path", "format", "glob", "text_field", "id_field", "url_field", "fmt", "follow_symlinks"},
    "warc": {"path", "format", "glob", "follow_symlinks"},
    "demo": {"domain", "components"},
}
_COMMON = {"name", "type", "weight", "max_epochs", "license", "lang", "filters"}


@dataclass(frozen=True)
class SourceConfig:
    name: str
    type: Literal["hf", "local", "warc", "demo"]
    weight: float
    max_epochs: float = 1.0  # > 1 allows upsampling a small source up to this many passes
    license: str = ""
    lang: str = ""  # expected language ("en", "zh", "code"); the langid filter verifies it
    filters: tuple[dict[str, Any], ...] = ()  # the filter chain, see minideepseek.filters.chain
    # hf
    path: str = ""  # hf: repo id or builder name ("json", "parquet"); local: file or directory
    config_name: str | None = None
    data_dir: str | None = None  # a sub-directory of a hub repo (e.g. one language of The Stack)
    split: str = "train"
    data_files: tuple[str, ...] = ()
    revision: str | None = None
    text_field: str = "text"
    id_field: str | None = None
    url_field: str | None = None
    shuffle_buffer: int = 10_000
    max_retries: int = 5
    retry_backoff_s: float = 2.0
    fmt: str = "text"  # extraction format of the text field (e.g. "html" for raw pages, "code")
    # local
    format: str = "auto"
    glob: str = "**/*"
    # A symlink under the source directory whose target lies outside it is skipped (reported per file)
    # unless this is true: a link planted in a data folder must not pull in /proc/self/environ or ~/.ssh.
    # Special files (FIFOs, sockets, devices, procfs/sysfs) are never read either way.
    follow_symlinks: bool = False
    # demo
    domain: str = ""
    components: tuple[str, ...] = ()

    @classmethod
    def check_keys(cls, data: dict, where: str) -> None:
        """Keys of another source type are mistakes (``split:`` on a local source), even at defaults."""
        kind = data.get("type")
        if kind not in _TYPE_KEYS:
            return  # __post_init__ reports the bad type
        stray = sorted(k for k in data if k not in _COMMON | _TYPE_KEYS[kind])
        if stray:
            name = data.get("name", where)
            raise ConfigError(f"sources.{name}: key(s) {stray} do not apply to type {kind!r}; "
                              f"keys for {kind!r}: {sorted(_TYPE_KEYS[kind])}")

    def __post_init__(self) -> None:
        where = f"sources.{self.name}"
        require(is_path_name(self.name),
                f"source name {self.name!r}: use letters, digits, '_', '-', '.', not dots alone (it appears in ids "
                f"and paths)")
        require(self.type in SOURCE_TYPES, f"{where}.type={self.type!r}: choose one of {list(SOURCE_TYPES)}")
        require(0.0 <= self.weight <= 1.0, f"{where}.weight={self.weight} must be within [0, 1]")
        require(self.max_epochs >= 1.0, f"{where}.max_epochs={self.max_epochs} must be >= 1 (1 = no upsampling)")
        require(self.shuffle_buffer >= 1, f"{where}.shuffle_buffer must be >= 1")
        require(self.max_retries >= 0, f"{where}.max_retries must be >= 0")
        if self.type in ("hf", "local", "warc"):
            require(bool(self.path), f"{where}.path is required for type {self.type!r}")
        if self.type == "local":
            require(self.format in LOCAL_FORMATS, f"{where}.format={self.format!r}: choose one of {list(LOCAL_FORMATS)}")
        if self.type == "warc":
            require(self.format in WARC_FORMATS, f"{where}.format={self.format!r}: choose one of {list(WARC_FORMATS)}")
        if self.type == "demo":
            require(self.domain in DEMO_DOMAINS, f"{where}.domain={self.domain!r}: choose one of {list(DEMO_DOMAINS)}")
        if self.filters:
            from ..filters import FilterChain

            FilterChain(self.filters, where)  # validates every filter's type and parameters now


def check_recipe(sources: tuple[SourceConfig, ...]) -> None:
    """The recipe is a distribution over uniquely named sources."""
    require(len(sources) > 0, "sources: the recipe needs at least one source")
    names = [s.name for s in sources]
    dupes = sorted({n for n in names if names.count(n) > 1})
    require(not dupes, f"sources: duplicate source name(s) {dupes}; every source needs its own name")
    total = sum(s.weight for s in sources)
    require(abs(total - 1.0) <= 1e-6,
            f"sources: weights sum to {total:.6f}, not 1 (within 1e-6); adjust them, e.g. "
            + ", ".join(f"{s.name}={s.weight / total:.4f}" for s in sources) if total > 0 else
            "sources: weights sum to 0; give each source a weight in (0, 1] summing to 1")
