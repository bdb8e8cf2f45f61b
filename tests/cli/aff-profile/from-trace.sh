# A profile fitted from a route trace counts every token selection of each expert.
aff-trace synth --family tiny --out t.aft -q
aff-profile --from-trace t.aft --top 2 --out p.afp
aff-profile p.afp --top 2 | cmp - <(aff-profile --from-trace t.aft --top 2)
