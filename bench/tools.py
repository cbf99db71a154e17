"""Latency of the orchestrator tools: sandbox start-up, MiniLM load, search index build and query, a domain call.

Run: PYTHONPATH=. python bench/tools.py
"""
import statistics, time
from train.environment.tools import LocalSearchTool, run_python
from domains.registry import get_spec, get_engine
from train.environment.tools import ToolCatalog, domain_tools
walls = [run_python("print(1)").wall_s for _ in range(10)]
print("sandbox run of print(1): median %.3f s, min %.3f s" % (statistics.median(walls), min(walls)))
t = time.perf_counter(); from synthesis.dedup import minilm; minilm(); print("MiniLM load %.2f s" % (time.perf_counter() - t))
for d in ("railway", "weather"):
    tool = LocalSearchTool(get_spec(d))
    t = time.perf_counter(); tool.call({"query": "refund"}); build = time.perf_counter() - t
    lat = [tool.call({"query": "what is the refund rule"}).latency_s for _ in range(20)]
    print("%s: first call (index build) %.2f s, then median query %.1f ms" % (d, build, 1000 * statistics.median(lat)))
with get_engine("railway", 0).fresh() as db:
    cat = ToolCatalog(domain_tools(db))
    lat = [cat.call("get_station", {"station_id": "ST001"}).latency_s for _ in range(200)]
    print("domain get_station: median %.3f ms" % (1000 * statistics.median(lat)))
