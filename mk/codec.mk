# mk/codec.mk - the /attend codec's benchmark (included by the top Makefile).

.PHONY: bench-codec
bench-codec: $(BUILD)/bench/bench_codec ## codec MB/s, ours vs jansson: decode [512,768] bodies, encode [12,512,512] weights; base64 GB/s per kernel
	$(BUILD)/bench/bench_codec
