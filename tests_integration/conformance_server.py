"""A stdio MCP server (Python SDK mcp 2.3.0, handshake era) with the tools, resources and
prompts the official conformance suite's server scenarios call for. The suite tests it
through `mcp-stdio serve` (test_conformance_server.py): what it judges is the gateway."""

import base64

import anyio
from mcp import types
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.utilities.types import Audio

server = MCPServer("conformance-fixture")

# A 1x1 PNG and a tiny WAV header: valid base64 of the declared types.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAHnOhcgAAAABJRU5ErkJggg==")
WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=")


@server.tool()
def test_simple_text() -> str:
    """The conformance suite's `test_simple_text`."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> Image:
    """The conformance suite's `test_image_content`."""
    return Image(data=PNG, format="png")


@server.tool()
def test_audio_content() -> Audio:
    """The conformance suite's `test_audio_content`."""
    return Audio(data=WAV, format="wav")


@server.tool()
def test_embedded_resource() -> list:
    """The conformance suite's `test_embedded_resource`."""
    return [types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="test://embedded-resource", mimeType="text/plain", text="This is an embedded resource content."))]


@server.tool()
def test_multiple_content_types() -> list:
    """The conformance suite's `test_multiple_content_types`."""
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="test://mixed-content-resource", mimeType="application/json", text='{"test":"data","value":123}')),
    ]


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """The conformance suite's `test_tool_with_logging`."""
    await ctx.info("Tool execution started")
    await anyio.sleep(0.05)
    await ctx.info("Tool processing data")
    await anyio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """The conformance suite's `test_tool_with_progress`."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step}")
        await anyio.sleep(0.05)
    return "Tool with progress executed successfully"


@server.tool()
def test_error_handling() -> str:
    """The conformance suite's `test_error_handling`."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """The conformance suite's `test_sampling`."""
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    text = getattr(result.content, "text", "")
    return f"LLM response: {text}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """The conformance suite's `test_elicitation`."""
    result = await ctx.session.elicit_form(
        message,
        {"type": "object", "properties": {"username": {"type": "string", "description": "User's response"}, "email": {"type": "string", "description": "User's email address"}}, "required": ["username", "email"]},
        related_request_id=ctx.request_id,
    )
    return f"User response: action={result.action}, content={result.content}"


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """The conformance suite's `test_elicitation_sep1034_defaults`."""
    result = await ctx.session.elicit_form(
        "Please review and update the form fields with defaults",
        {"type": "object", "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": True}}},
        related_request_id=ctx.request_id,
    )
    return f"Elicitation completed: action={result.action}, content={result.content}"


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """The conformance suite's `test_elicitation_sep1330_enums`."""
    result = await ctx.session.elicit_form(
        "Please select options",
        {"type": "object", "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}}},
        related_request_id=ctx.request_id,
    )
    return f"Elicitation completed: action={result.action}, content={result.content}"


@server.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str = "", address: dict | None = None) -> str:
    """The conformance suite's `json_schema_2020_12_tool`."""
    return f"name={name}"


# Advertised with the suite's exact 2020-12 schema ($schema, $defs, additionalProperties).
server._tool_manager.get_tool("json_schema_2020_12_tool").parameters = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


@server.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    return PNG


@server.resource("test://template/{id}/data", mime_type="application/json")
def template(id: str) -> str:
    return f'{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}'


@server.resource("test://watched-resource", mime_type="text/plain")
def watched() -> str:
    return "Watched resource content"


@server.prompt()
def test_simple_prompt() -> str:
    """The conformance suite's `test_simple_prompt`."""
    return "This is a simple prompt for testing."


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """The conformance suite's `test_prompt_with_arguments`."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    """The conformance suite's `test_prompt_with_embedded_resource`."""
    return [
        {"role": "user", "content": {"type": "resource", "resource": {"uri": resourceUri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]


@server.prompt()
def test_prompt_with_image() -> list:
    """The conformance suite's `test_prompt_with_image`."""
    return [
        {"role": "user", "content": {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


@server.completion()
async def complete(ref, argument, context):
    return types.Completion(values=[], total=0, has_more=False)


async def subscribe(ctx, params) -> types.EmptyResult:
    return types.EmptyResult()


server._lowlevel_server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
server._lowlevel_server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, subscribe)


async def set_level(ctx, params) -> types.EmptyResult:
    return types.EmptyResult()


server._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)


if __name__ == "__main__":
    server.run("stdio")
