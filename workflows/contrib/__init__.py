"""Integrations with other libraries, each in a subpackage that imports its library on use:
`workflows.contrib.pydantic_ai` runs a pydantic-ai `Agent` durably inside a workflow."""
