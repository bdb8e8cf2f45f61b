# tiny-a (BF16 experts, transformers names) with a tokenizer.json and a chat template
# beside it: the container passes aff-verify with every tensor digest, and aff-info
# shows the experts quantised, the sections embedded and the provenance recorded.
mkdir ck
ln -s "$DATA/models/tiny-a/config.json" "$DATA/models/tiny-a/model.safetensors" ck/
printf '{"model": {"type": "BPE"}}\n' > ck/tokenizer.json
printf '{%% for m in messages %%}{{ m.content }}{%% endfor %%}' > ck/chat_template.jinja
SOURCE_DATE_EPOCH=1764374400 aff-quantize --src ck --out m.aff --threads 2 --progress never
aff-verify m.aff --progress never
aff-info m.aff | grep -v -e '^quantiser' -e '^codebook'
