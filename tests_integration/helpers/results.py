"""Tool results as a schema-checking client reads them: the TypeScript SDK client validates
`structuredContent` against the tool's `outputSchema` whenever it is present, error results
included. `checked` applies that rule with a JSON Schema validator (jsonschema, Draft
2020-12, the spec's default dialect), then ours for refusals: no `structuredContent`, the
words in the first text block, the RFC 9457 problem document in `_meta` and as JSON."""

import json

import jsonschema

PROBLEM_KEY = "mcp-stdio/problem"
# What the problem document promises a program (docs/sandbox.md, "Refusals").
PROBLEM_SCHEMA = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "pattern": "^urn:mcp-stdio:problem:[a-z-]+$"},
        "title": {"type": "string", "minLength": 1},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string", "minLength": 1},
        "code": {"type": "string", "pattern": "^MCP_[A-Z_]+$"},
        "invalid_params": {"type": "array", "items": {"type": "string"}},
        "remedy": {"type": "string", "minLength": 1},
        "error": {"type": "string"},
    },
    "required": ["type", "title", "status", "detail", "code", "invalid_params", "remedy"],
}


def wire(result) -> dict:
    """The result as it travelled (camelCase keys, `_meta`)."""
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def checked(tools: dict, name: str, result) -> dict:
    """Validates one result as a schema-checking client would, then by our own rules; returns
    the problem document of a refusal (or the structured content of a success)."""
    raw = wire(result)
    schema = tools[name]
    jsonschema.Draft202012Validator.check_schema(schema)
    # The TypeScript client's rule: structuredContent, when present, matches outputSchema.
    if "structuredContent" in raw:
        jsonschema.Draft202012Validator(schema).validate(raw["structuredContent"])
    if not raw.get("isError"):
        assert "structuredContent" in raw, f"{name}: a success carries structuredContent: {raw}"
        return raw["structuredContent"]
    assert "structuredContent" not in raw, f"{name}: a refusal carries no structuredContent: {raw}"
    problem = raw["_meta"][PROBLEM_KEY]
    jsonschema.Draft202012Validator(PROBLEM_SCHEMA).validate(problem)
    words = raw["content"][0]["text"]
    assert problem["detail"] in words and problem["remedy"] in words, raw
    assert json.loads(raw["content"][1]["text"]) == problem, raw
    return problem


async def output_schemas(client) -> dict:
    schemas, cursor = {}, None
    while True:
        page = await client.list_tools(cursor=cursor)
        schemas.update({tool.name: tool.output_schema for tool in page.tools})
        cursor = page.next_cursor
        if not cursor:
            return schemas


