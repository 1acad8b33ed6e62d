#!/bin/bash
# session 17 call 1: session 16's call 7, run as it was (it was ready but found no device time then): the final
# defaults (the three TMA-ring GEMVs with no PDL trigger, on every layer they fit): test_gpu_engine, the TMA GEMVs'
# GPU tests, batch-1 decode of w4a16, mxfp4, fp8 with and without them.
exec bash bench/results/2026-12-01-h200-s16/call7/cmd.sh
