"""The shapes the example app accepts: a job's start message and an invoice's order."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workflows.http import unstorable


class JobStart(BaseModel):
    """What `POST /jobs` takes and the aiJob's `start` queue holds."""

    model_config = ConfigDict(extra="forbid", strict=True)

    title: str = Field(min_length=1, max_length=500, description="The call's title.")
    transcript: str = Field(min_length=1, description="The call's transcript, plain text.")

    @field_validator("title", "transcript")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        problem = unstorable(value)  # NUL, a lone surrogate: PostgreSQL cannot store it
        if problem is not None:
            raise ValueError(f"the value {problem}")
        return value


class InvoiceLine(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    description: str = Field(min_length=1)
    quantity: int = Field(gt=0)
    unit_price_cents: int = Field(ge=0)


class InvoiceOrder(BaseModel):
    """The invoice workflow's `order` message: lines and the region whose tax applies."""

    model_config = ConfigDict(extra="forbid", strict=True)

    region: str = Field(min_length=1)
    lines: list[InvoiceLine] = Field(min_length=1)
