"""Stage 4: tokenize with our tokenizer, pack into fixed-length uint32 blocks with one EOT after
every document, shuffle documents and blocks, write bounded ``.arrow`` shards with document spans."""
