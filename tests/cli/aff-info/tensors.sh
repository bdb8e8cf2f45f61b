# --tensors lists the directory one tensor a line (header, dense and routed-expert rows shown).
aff-info --tensors "$DATA/tiny.aff" | sed -n "1,3p;15,17p"
