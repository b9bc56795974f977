#!/bin/bash
# On the GPU machine (~6 min on an H200), with release 0.3.17's table unchanged: gpu/final_v0317.sh again, i.e. a
# third run of the reference sweep's N <= 2048 half and a fifth headline sweep, to see how far the shapes closest to
# cuDNN move from run to run.
# Results under $OUT: reference_a.csv, reference_a.log, headline_v0317_run5.csv, headline_v0317_run5.log
# (committed as book/results/reference_a_v0317_run3.{csv,log} and book/results/headline_v0317_run5.{csv,log})
NAME=headline_v0317_run5 exec bash gpu/final_v0317.sh
