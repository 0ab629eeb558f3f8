"""Pydantic models handed to library users: `Entry` and `Tombstone`.

They are built from lines that `memsync.core.lines.classify` has already judged valid (the
single place that decides validity); strict mode keeps pydantic from coercing anything
(lax mode would turn "0.9" into 0.9). Unknown fields are kept (`extra="allow"`, rule 3).
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from memsync.core.records import Record
from memsync.core.timestamps import to_datetime

__all__ = ["Entry", "Kind", "Tombstone", "to_model"]

Kind = Literal["preference", "lesson", "fact", "source", "avoid"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)


class Entry(_Frozen):
    """One memory entry (spec "Entry", SEMANTICS rule 3)."""

    id: str = Field(min_length=1)
    """12 lowercase hex digits when memsync made it; any non-empty string is read."""
    kind: Kind
    """preference, lesson, fact, source or avoid."""
    text: str
    """One sentence a model can read as-is."""
    scope: str = "global"
    """`global`, a domain such as `github.com`, or `project:<name>`."""
    tags: list[str] = Field(default_factory=list)
    source: str | None = None
    """Where it was learned; `user` when the person said it (rule 9)."""
    confidence: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    expires_at: AwareDatetime | None = None
    supersedes: str | None = None
    created_at: AwareDatetime

    @property
    def from_user(self) -> bool:
        """Whether the person said it (`source: "user"`), which outranks inference."""
        return self.source == "user"


class Tombstone(_Frozen):
    """A deletion of every version of `id` created at or before `created_at` (rule 8)."""

    id: str = Field(min_length=1)
    deleted: Literal[True] = True
    created_at: AwareDatetime


def to_model(record: Record) -> Entry | Tombstone:
    """The pydantic model of a valid record, its instants exactly the record's (pydantic
    truncates digits beyond the microsecond where memsync rounds them)."""
    model: Entry | Tombstone
    if record.deleted:
        model = Tombstone.model_validate_json(record.raw)
    else:
        model = Entry.model_validate_json(record.raw)
    exact = to_datetime(record.ts)
    if model.created_at != exact:
        model = model.model_copy(update={"created_at": exact.astimezone(model.created_at.tzinfo)})
    if isinstance(model, Entry) and record.expires is not None and model.expires_at is not None:
        expires = to_datetime(record.expires)
        if model.expires_at != expires:
            model = model.model_copy(
                update={"expires_at": expires.astimezone(model.expires_at.tzinfo)}
            )
    return model
