-- wrk script: a small streaming chat completion that asks for the usage
-- chunk, so the relay's SSE usage scan and the per-slot token counters are
-- on the path being measured. Usage:
--   wrk -t2 -c32 -d5s -s tests/bench/metrics/bench_stream.lua http://127.0.0.1:PORT
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-dpgate-local"
wrk.body = '{"model":"ds-v4.1-flash-1017","max_tokens":16,"stream":true,' ..
           '"stream_options":{"include_usage":true},' ..
           '"messages":[{"role":"system","content":"You are a helpful assistant."},' ..
           '{"role":"user","content":"Say hello to the gateway benchmark in a few words."}]}'
