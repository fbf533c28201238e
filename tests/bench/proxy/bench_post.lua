-- wrk script: a small non-streaming chat completion, the shape a gateway
-- forwards most. Usage:
--   wrk -t2 -c32 -d5s -s tests/bench/proxy/bench_post.lua http://127.0.0.1:PORT
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-dpgate-local"
wrk.body = '{"model":"ds-v4.1-flash-1017","max_tokens":16,' ..
           '"messages":[{"role":"system","content":"You are a helpful assistant."},' ..
           '{"role":"user","content":"Say hello to the gateway benchmark in a few words."}]}'

-- wrk itself reports "Non-2xx or 3xx responses" when any answer failed, so a
-- broken run cannot pass for a fast one.
