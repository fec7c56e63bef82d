"""A stdio MCP server (Python SDK mcp 2.3.0, handshake era) with the tools, resources and
prompts the official conformance suite's server scenarios call for. The suite tests it
through `mcp-stdio serve` (test_conformance_server.py): what it judges is the gateway."""

import base64
import sys

import anyio
from mcp import types
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.utilities.types import Audio
from mcp.shared.exceptions import MCPError

server = MCPServer("conformance-fixture", version="1.0.0")

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


# Advertised with the suite's exact 2020-12 schema ($schema, $defs with $anchor,
# allOf/anyOf, if/then/else, additionalProperties).
server._tool_manager.get_tool("json_schema_2020_12_tool").parameters = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


# --- 2026-07-28 (SEP-2322 input_required, SEP-2575, SEP-2243) -----------------------------
# Each interactive tool answers a 2026-07-28 client with an InputRequiredResult (the SDK
# seals its requestState), and a handshake-era client (the gateway's pooled child, when this
# server runs --legacy-only) with real elicitation/sampling/roots requests, which the gateway
# turns into input_required rounds itself.

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
COLOR_SCHEMA = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}


def modern(ctx: Context) -> bool:
    return (ctx.protocol_version or "") >= "2026"


def elicit(message: str, schema: dict) -> dict:
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def sample(text: str, max_tokens: int) -> dict:
    return {"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens}}


ROOTS = {"method": "roots/list", "params": {}}


def input_required(requests: dict, state: str | None = None) -> types.InputRequiredResult:
    wire = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        wire["requestState"] = state
    return types.InputRequiredResult.model_validate(wire)


def answered(ctx: Context, *keys: str) -> dict | None:
    """The client's responses for all of `keys`, or None (then ask again)."""
    responses = ctx.input_responses or {}
    if not all(key in responses for key in keys):
        return None
    return {key: responses[key].model_dump(by_alias=True, exclude_none=True) for key in keys}


async def legacy_ask(ctx: Context, request: dict) -> dict:
    """Asks the client the handshake-era way; returns the result as wire JSON."""
    params = request["params"]
    if request["method"] == "elicitation/create":
        result = await ctx.session.elicit_form(params["message"], params["requestedSchema"], related_request_id=ctx.request_id)
    elif request["method"] == "sampling/createMessage":
        message = params["messages"][0]["content"]["text"]
        result = await ctx.session.create_message(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=message))],
            max_tokens=params["maxTokens"],
            related_request_id=ctx.request_id,
        )
    else:
        result = await ctx.session.list_roots()
    return result.model_dump(by_alias=True, exclude_none=True)


def text_of(response: dict) -> str:
    if "content" in response and isinstance(response["content"], dict):
        content = response["content"]
        return str(content.get("text", content))
    return str(response)


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-2322: asks the user's name, then greets them."""
    request = elicit("What is your name?", NAME_SCHEMA)
    if modern(ctx):
        got = answered(ctx, "user_name")
        if got is None:
            return input_required({"user_name": request})
        response = got["user_name"]
    else:
        response = await legacy_ask(ctx, request)
    name = (response.get("content") or {}).get("name", "stranger")
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"Hello, {name}!")])


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-2322: one sampling request, then its text."""
    request = sample("What is the capital of France?", 100)
    if modern(ctx):
        got = answered(ctx, "capital_question")
        if got is None:
            return input_required({"capital_question": request})
        response = got["capital_question"]
    else:
        response = await legacy_ask(ctx, request)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"LLM said: {text_of(response)}")])


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-2322: one roots/list request, then the roots it got."""
    if modern(ctx):
        got = answered(ctx, "client_roots")
        if got is None:
            return input_required({"client_roots": ROOTS})
        response = got["client_roots"]
    else:
        response = await legacy_ask(ctx, ROOTS)
    uris = [root.get("uri") for root in response.get("roots", [])]
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"Roots: {', '.join(map(str, uris))}")])


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-2322: the requestState round-trips (the SDK seals and verifies it)."""
    request = elicit("Please confirm", CONFIRM_SCHEMA)
    if modern(ctx):
        if ctx.request_state != "round-1" or answered(ctx, "confirm") is None:
            return input_required({"confirm": request}, "round-1")
    else:
        await legacy_ask(ctx, request)
    return types.CallToolResult(content=[types.TextContent(type="text", text="state-ok: confirmed")])


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-2322: a tampered requestState is refused (by the SDK's seal, or the gateway's)."""
    request = elicit("Please confirm", CONFIRM_SCHEMA)
    if modern(ctx):
        if ctx.request_state != "tamper-proof" or answered(ctx, "confirm") is None:
            return input_required({"confirm": request}, "tamper-proof")
    else:
        await legacy_ask(ctx, request)
    return types.CallToolResult(content=[types.TextContent(type="text", text="state-ok")])


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-2322: elicitation, sampling and roots in one round."""
    requests = {"user_name": elicit("What is your name?", NAME_SCHEMA), "greeting": sample("Generate a greeting", 50), "client_roots": ROOTS}
    if modern(ctx):
        if ctx.request_state != "all-three" or answered(ctx, *requests) is None:
            return input_required(requests, "all-three")
    else:
        for request in requests.values():
            await legacy_ask(ctx, request)
    return types.CallToolResult(content=[types.TextContent(type="text", text="All inputs received")])


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-2322: two rounds, the requestState evolving between them."""
    step1 = elicit("Step 1: What is your name?", NAME_SCHEMA)
    step2 = elicit("Step 2: What is your favorite color?", COLOR_SCHEMA)
    if modern(ctx):
        if ctx.request_state == "round-2" and answered(ctx, "step2") is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text="Both steps complete")])
        if ctx.request_state == "round-1" and answered(ctx, "step1") is not None:
            return input_required({"step2": step2}, "round-2")
        return input_required({"step1": step1}, "round-1")
    await legacy_ask(ctx, step1)
    await legacy_ask(ctx, step2)
    return types.CallToolResult(content=[types.TextContent(type="text", text="Both steps complete")])


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """SEP-2322: asks only for what the client declared it can answer."""
    if modern(ctx):
        declared = ctx.client_capabilities or types.ClientCapabilities()
        requests = {}
        if declared.sampling is not None:
            requests["capital_question"] = sample("What is the capital of France?", 100)
        if declared.elicitation is not None:
            requests["user_name"] = elicit("What is your name?", NAME_SCHEMA)
        if requests and answered(ctx, *requests) is None:
            return input_required(requests)
    else:
        await legacy_ask(ctx, sample("What is the capital of France?", 100))
    return types.CallToolResult(content=[types.TextContent(type="text", text="Capabilities respected")])


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """SEP-2575: needs sampling; a client that did not declare it gets -32021."""
    if modern(ctx):
        declared = ctx.client_capabilities or types.ClientCapabilities()
        if declared.sampling is None:
            raise MCPError(-32021, "this tool needs the client's sampling capability", {"requiredCapabilities": {"sampling": {}}})
        return "sampling was declared"
    response = await legacy_ask(ctx, sample("Say hi", 10))
    return f"sampled: {text_of(response)}"


@server.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """SEP-2575's diagnostic hook: the tool list changes (a tool is added)."""
    server.add_tool(lambda: "added", name=f"added_tool_{len(server._tool_manager.list_tools())}", description="Added by test_trigger_tool_change.")
    if modern(ctx):
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return "tool list changed"


@server.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """SEP-2575's diagnostic hook: the prompt list changes."""
    if modern(ctx):
        await ctx.notify_prompts_changed()
    else:
        await ctx.session.send_prompt_list_changed()
    return "prompt list changed"


@server.tool()
def test_custom_header(region: str, query: str) -> str:
    """SEP-2243: `region` is mirrored into the Mcp-Param-Region header."""
    return f"region={region} query={query}"


server._tool_manager.get_tool("test_custom_header").parameters = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}},
    "required": ["region", "query"],
}


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list | types.InputRequiredResult:
    """SEP-2322 on prompts/get: asks for context first."""
    request = elicit("What context should the prompt use?", {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]})
    if modern(ctx):
        got = answered(ctx, "user_context")
        if got is None:
            return input_required({"user_context": request})
        response = got["user_context"]
    else:
        response = await legacy_ask(ctx, request)
    context = (response.get("content") or {}).get("context", "")
    return [{"role": "user", "content": {"type": "text", "text": f"Prompt with context: {context}"}}]


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


async def legacy_only() -> None:
    """The handshake era only: the SDK's loop without its 2026-07-28 entry."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        async with low.lifespan(low) as state:
            await serve_loop(low, read_stream, write_stream, lifespan_state=state, init_options=low.create_initialization_options())


if __name__ == "__main__":
    if "--legacy-only" in sys.argv:
        anyio.run(legacy_only)
    elif "--sse" in sys.argv:
        # The 2024-11-05 HTTP+SSE transport: GET /sse, POST /messages/.
        port = int(sys.argv[sys.argv.index("--sse") + 1])
        anyio.run(lambda: server.run_sse_async(host="127.0.0.1", port=port))
    else:
        server.run("stdio")
