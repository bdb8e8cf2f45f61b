aff-info --tensors "$DATA/tiny.aff" | sed -n "1,3p;15,17p"
