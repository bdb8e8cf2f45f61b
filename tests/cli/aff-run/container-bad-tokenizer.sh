# A container's TOKJ section is its tokenizer; one it cannot use is one error naming the section.
aff-run -m "$DATA/tiny.aff" --tokens 1
