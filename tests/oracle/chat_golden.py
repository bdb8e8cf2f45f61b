#!/usr/bin/env python3
"""Produces the golden data for libaff's DeepSeek-V4 chat encoding by running DeepSeek's
reference encoder (encoding_dsv4.py from the DeepSeek-V4 release; not part of this
repository) over conversations designed here to cover every role, thinking mode, reasoning
effort and tool case. Only the encoder's output is committed, never its code.

Request-level tools and response_format are attached the way libaff's render_prompt
documents (first system message, or an empty system message inserted in front) before the
reference sees them; the case records them request-level so the C++ test passes them so.

usage: chat_golden.py DIR_WITH_encoding_dsv4.py OUT_DIR
writes OUT_DIR/render_cases.json and OUT_DIR/parse_cases.json
"""
import copy
import json
import sys

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "搜索网页并返回结果（中文描述）。",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "top_k": {"type": "integer", "minimum": 1, "default": 5},
        "filters": {"type": "object", "properties": {"site": {"type": "string"}, "after": {"type": "number"}}}},
        "required": ["query"]}}}
RUN = {"type": "function", "function": {
    "name": "run_code", "description": "Runs \"code\" in a sandbox; returns stdout.\nMulti-line description.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}, "timeout_s": {"type": "number"},
                                                   "env": {"type": "array", "items": {"type": "string"}}}}}}
NOPARAM = {"type": "function", "function": {"name": "now", "description": "Current time.", "parameters": {
    "type": "object", "properties": {}}}}


def call(cid, name, args):
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def conversations():
    C = []

    def add(name, messages, mode="chat", effort=None, drop=True, bos=True, tools=None, response_format=None):
        C.append(dict(name=name, messages=messages, thinking_mode=mode, reasoning_effort=effort,
                      drop_thinking=drop, add_bos=bos, tools=tools, response_format=response_format))

    sys_user = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"}]
    add("chat: system and user", sys_user)
    add("thinking: system and user", sys_user, "thinking")
    add("thinking max effort", sys_user, "thinking", "max")
    add("thinking high effort renders as none", sys_user, "thinking", "high")
    add("chat mode ignores max effort", sys_user, "chat", "max")
    add("user only, chat", [{"role": "user", "content": "Hello"}])
    add("user only, thinking max", [{"role": "user", "content": "Prove it."}], "thinking", "max")
    multi = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7", "reasoning_content": "Small primes: 2, 3, 5, 7."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "11", "reasoning_content": "Next after 7 is 11."},
        {"role": "user", "content": "And one more, larger than 100?"},
    ]
    add("multi-turn chat drops nothing but shows no reasoning", multi)
    add("multi-turn thinking drops earlier reasoning", multi, "thinking")
    add("multi-turn thinking keeps reasoning without drop_thinking", multi, "thinking", drop=False)
    add("multi-turn thinking max effort", multi, "thinking", "max")
    last_assistant = multi[:5]
    add("ends with an assistant turn (thinking)", last_assistant, "thinking")
    add("ends with an assistant turn (chat)", last_assistant)
    tool_round = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
         "tool_calls": [call("c1", "get_weather", {"city": "Paris", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"t\": 18, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 18 °C and clear in Paris.", "reasoning_content": "Tool said 18."},
        {"role": "user", "content": "And in Tokyo?"},
    ]
    add("tools round trip, chat", tool_round, tools=[WEATHER])
    add("tools round trip, thinking (tools disable dropping)", tool_round, "thinking", tools=[WEATHER])
    add("tools round trip, thinking max", tool_round, "thinking", "max", tools=[WEATHER, SEARCH])
    add("tool history without tools defined, thinking drops", tool_round, "thinking")
    add("pending tool result, chat", tool_round[:4], tools=[WEATHER])
    add("pending tool result, thinking", tool_round[:4], "thinking", tools=[WEATHER])
    parallel = [
        {"role": "user", "content": "Weather in Oslo and Lima, and search news."},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            call("a", "get_weather", {"city": "Oslo"}), call("b", "get_weather", {"city": "Lima"}),
            call("c", "search", {"query": "news today", "top_k": 3, "filters": {"site": "example.org", "after": 1.0}})]},
        {"role": "tool", "tool_call_id": "c", "content": "results: none"},
        {"role": "tool", "tool_call_id": "a", "content": "-3"},
        {"role": "tool", "tool_call_id": "b", "content": "22"},
    ]
    add("parallel calls, results reordered to call order (no system: one is inserted)", parallel,
        tools=[WEATHER, SEARCH])
    add("parallel calls, thinking", parallel, "thinking", tools=[WEATHER, SEARCH])
    typed = [
        {"role": "system", "content": "Coder."},
        {"role": "user", "content": "Run it."},
        {"role": "assistant", "content": "", "tool_calls": [call("x", "run_code", {
            "code": "print(\"hi\")\nfor i in range(3):\n\tprint(i)", "timeout_s": 1.5, "env": ["A=1", "B=ü"],
            "flags": {"fast": True, "level": None, "ratio": 1e-7, "big": 1e16, "neg": -0.0, "int": 12345678901234}})]},
        {"role": "tool", "tool_call_id": "x", "content": "hi\n0\n1\n2"},
    ]
    add("typed arguments: strings raw, others as Python JSON", typed, tools=[RUN])
    bad_args = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call("q", "run_code", "not json {")]},
        {"role": "tool", "tool_call_id": "q", "content": "error"},
    ]
    add("arguments that are not JSON become one string parameter", bad_args, tools=[RUN])
    add("tool without parameters and empty arguments", [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": "", "tool_calls": [call("n", "now", {})]},
        {"role": "tool", "tool_call_id": "n", "content": "12:00"},
        {"role": "assistant", "content": "It is noon."},
    ], tools=[NOPARAM])
    add("developer message with its own tools", [
        {"role": "developer", "content": "Search agent instructions.", "tools": [SEARCH]},
        {"role": "user", "content": "find x"},
    ], "thinking")
    add("developer before the last user is dropped in thinking mode", [
        {"role": "system", "content": "S"},
        {"role": "developer", "content": "Old developer note."},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
    ], "thinking")
    add("developer kept in chat mode", [
        {"role": "developer", "content": "Dev."},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ])
    add("latest_reminder after the user", [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "What day is it?"},
        {"role": "latest_reminder", "content": "Date: 2026-11-29. Locale: fr-FR."},
    ], "thinking")
    add("latest_reminder then assistant", [
        {"role": "user", "content": "hi"},
        {"role": "latest_reminder", "content": "Be formal."},
        {"role": "assistant", "content": "Good day."},
        {"role": "user", "content": "bye"},
    ])
    schema = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {
        "type": "object", "properties": {"value": {"type": "integer"}, "note": {"type": "string"}}}}}
    add("response_format on the system message", sys_user, response_format=schema)
    add("response_format and tools, thinking", sys_user, "thinking", tools=[WEATHER], response_format=schema)
    add("consecutive user messages merge", [
        {"role": "user", "content": "part one"}, {"role": "user", "content": "part two"},
        {"role": "user", "content": "part three"}], "thinking")
    add("user text after tool results merges into the same turn", [
        {"role": "user", "content": "w?"},
        {"role": "assistant", "content": "", "tool_calls": [call("w", "get_weather", {"city": "Rome"})]},
        {"role": "tool", "tool_call_id": "w", "content": "30"},
        {"role": "user", "content": "Also, convert to fahrenheit."},
    ], "thinking", tools=[WEATHER])
    prefill = [{"role": "user", "content": "Write a haiku."},
               {"role": "assistant", "content": "Autumn moon", "wo_eos": True}]
    add("assistant prefill without EOS (chat)", prefill)
    add("assistant prefill without EOS (thinking)", [prefill[0], dict(prefill[1], reasoning_content="Plan: 5-7-5.")],
        "thinking")
    add("special-token strings and unicode inside content", [
        {"role": "system", "content": "规则：用中文回答。😀👨‍👩‍👧"},
        {"role": "user", "content": "Explain <｜User｜> and </think> and <｜DSML｜invoke> literally.\n\n\ttabs"},
    ], "thinking")
    add("continuation without BOS", [{"role": "user", "content": "next"}], "chat", bos=False)
    add("two system messages, tools go on the first", [
        {"role": "system", "content": "First."}, {"role": "system", "content": "Second."},
        {"role": "user", "content": "q"}], tools=[WEATHER])
    add("tool result given as a list of text parts", [
        {"role": "user", "content": "w?"},
        {"role": "assistant", "content": "", "tool_calls": [call("p", "get_weather", {"city": "Bern"})]},
        {"role": "tool", "tool_call_id": "p", "content": [{"type": "text", "text": "line one"},
                                                          {"type": "text", "text": "line two"}]},
    ], tools=[WEATHER])
    add("system message only", [{"role": "system", "content": "Only system."}])
    add("empty system content with tools", [{"role": "system", "content": ""}, {"role": "user", "content": "q"}],
        "thinking", "max", tools=[NOPARAM])
    return C


def to_reference(case):
    msgs = copy.deepcopy(case["messages"])
    extras = {}
    if case["tools"]:
        extras["tools"] = case["tools"]
    if case["response_format"]:
        extras["response_format"] = case["response_format"]
    if extras:
        for m in msgs:
            if m["role"] == "system":
                m.update(extras)
                break
        else:
            msgs.insert(0, dict(role="system", content="", **extras))
    return msgs


def completion_text(enc, msg, mode):
    """What the model generates for `msg`, cut from the reference's rendering."""
    rendered = enc.encode_messages([{"role": "user", "content": "u"}, msg], thinking_mode=mode, drop_thinking=False)
    head = enc.encode_messages([{"role": "user", "content": "u"}], thinking_mode=mode, drop_thinking=False)
    assert rendered.startswith(head)
    return rendered[len(head):]


def main():
    sys.path.insert(0, sys.argv[1])
    import encoding_dsv4 as enc
    out_dir = sys.argv[2]
    render_cases, parse_cases = [], []
    for case in conversations():
        prompt = enc.encode_messages(to_reference(case), thinking_mode=case["thinking_mode"],
                                     drop_thinking=case["drop_thinking"], add_default_bos_token=case["add_bos"],
                                     reasoning_effort=case["reasoning_effort"])
        render_cases.append(dict(case, prompt=prompt))
        for m in case["messages"]:
            if m["role"] != "assistant" or m.get("wo_eos"):
                continue
            for mode in ("chat", "thinking"):
                text = completion_text(enc, {k: v for k, v in m.items() if k != "id"}, mode)
                parsed = enc.parse_message_from_completion_text(text, thinking_mode=mode)
                parse_cases.append(dict(name=f"{case['name']} / {mode}", thinking_mode=mode, text=text,
                                        reasoning=parsed["reasoning_content"], content=parsed["content"],
                                        tool_calls=[dict(name=c["function"]["name"], arguments=c["function"]["arguments"])
                                                    for c in parsed["tool_calls"]]))
    # Deduplicate parse cases with identical text and mode.
    seen, unique = set(), []
    for p in parse_cases:
        key = (p["text"], p["thinking_mode"])
        if key not in seen:
            seen.add(key)
            unique.append(p)
    with open(f"{out_dir}/render_cases.json", "w", encoding="utf-8") as f:
        json.dump(render_cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(f"{out_dir}/parse_cases.json", "w", encoding="utf-8") as f:
        json.dump(unique, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(render_cases)} render cases, {len(unique)} parse cases", file=sys.stderr)


if __name__ == "__main__":
    main()
