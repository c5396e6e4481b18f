"""llama.cpp's tokenizer as a reference, for the golden-file generators gen_golden_tokens.py
(Gemma 3) and gen_tokenizer_corpus.py (Gemma 4): a vocabulary-only load of a GGUF through
llama-cpp-python's low-level bindings, which call llama.cpp's own llama_tokenize,
llama_token_to_piece and llama_detokenize. (The high-level Llama.detokenize() uses a 32-byte
piece buffer and strips a leading space after BOS, neither of which is llama.cpp's behaviour.)
Needs llama-cpp-python (the .venv-ref reference venv); not used at test time.
"""
import ctypes
import sys

import llama_cpp


class Vocab:
    def __init__(self, path):
        llama_cpp.llama_backend_init()
        mparams = llama_cpp.llama_model_default_params()
        mparams.vocab_only = True
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
        if not self.model:
            sys.exit("cannot load " + path)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.bos = llama_cpp.llama_vocab_bos(self.vocab)
        self.eos = llama_cpp.llama_vocab_eos(self.vocab)
        self._pbuf = ctypes.create_string_buffer(4096)

    def close(self):
        llama_cpp.llama_model_free(self.model)

    def tokenize(self, b, add_special, parse_special):
        cap = 3 * len(b) + 16  # an invalid byte can become three byte tokens (U+FFFD)
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, b, len(b), buf, cap, add_special, parse_special)
        assert n >= 0, n
        return list(buf[:n])

    def piece(self, i, special):
        n = llama_cpp.llama_token_to_piece(self.vocab, i, self._pbuf, len(self._pbuf), 0, special)
        assert 0 <= n <= len(self._pbuf), n
        return self._pbuf.raw[:n]

    def pieces(self, ids, special):
        return b"".join(self.piece(i, special) for i in ids)

    def detokenize(self, ids, remove_special, unparse_special):
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        n = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), None, 0, remove_special, unparse_special)
        if n == 0:
            return b""
        cap = -n if n < 0 else n
        out = ctypes.create_string_buffer(cap + 1)
        n = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), out, cap, remove_special, unparse_special)
        assert n >= 0, n
        return out.raw[:n]

    def fnv_pieces(self, special):
        """FNV-1a-64 over every token's piece: its length as 4 little-endian bytes, then the bytes
        (the C tests compute the same over tokenizer_piece)."""
        h = 0xCBF29CE484222325
        for i in range(self.n_vocab):
            p = self.piece(i, special)
            for c in len(p).to_bytes(4, "little") + p:
                h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return f"{h:016x}"


def version():
    return "llama-cpp-python " + llama_cpp.__version__
