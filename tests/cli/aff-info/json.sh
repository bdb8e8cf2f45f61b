# The JSON summary carries the figures scripts need; python3 reads it as a client would.
aff-info --json "$DATA/tiny.aff" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["size"], j["version"], j["role"], j["tensors"], j["expert_extents"])
print(j["bytes"])
print(round(j["expert_bits_per_weight"], 4), j["codebook"], j["profile"], j["provenance"]["created"])
print(j["config"]["num_hidden_layers"], "tensor_list" in j)'
aff-info --json --tensors "$DATA/tiny.aff" | python3 -c '
import json, sys
t = json.load(sys.stdin)["tensor_list"]
print(len(t), t[0])'
