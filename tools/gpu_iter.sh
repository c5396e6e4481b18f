. .gpu/gpu-env.sh >/dev/null 2>&1
export XDG_CACHE_HOME=/tmp/cc PATH=$PATH:/usr/local/cuda/bin
S=--synthetic
timeout 120 build/tests/test_kernels > $OUT/tk.txt 2>&1; echo "test_kernels rc=$? $(grep -c PASS $OUT/tk.txt) passed"; grep FAIL $OUT/tk.txt | head -5
b() { tag=$1; shift; j=$(timeout 100 build/clgemma bench "$@" 2>$OUT/$tag.err); echo "$tag rc=$? $(echo $j | grep -o '"decode_tok_s":[0-9.]*')"; }
b 31b_20l $S gemma4-31b --type q4_k -p 16 -n 16 -r 1 --layers 20
CLGEMMA_MV_WG=256 b 31b_20l_wg256 $S gemma4-31b --type q4_k -p 16 -n 16 -r 1 --layers 20
b e4b $S gemma4-e4b --type q8_0 -p 16 -n 16 -r 1
b 31b_b16 $S gemma4-31b --type q4_k -b 16 -p 16 -n 16 -r 1 --layers 20
f=$(ls /tmp/cc/clgemma/* | head -1)
python3 -c "import sys;b=open(sys.argv[1],'rb').read();i=b.find(b'//');j=b.rfind(b'}');open('/tmp/p.ptx','wb').write(b[i:j+1]+b'\n')" $f
ptxas -arch=sm_90 -v /tmp/p.ptx -o /tmp/x.cubin > $OUT/ptxas.txt 2>&1; head -3 $OUT/ptxas.txt
grep -A2 -E "Compiling entry function '(mv4_q4_k|mv4_q8_0|mmqs_q4_k|mmql_q4_k|mv_multi|mmqs_q8_0)'" $OUT/ptxas.txt | grep -E "entry|Used|spill"
timeout 100 build/clgemma bench $S gemma4-31b --type q4_k -p 16 -n 16 -r 1 --layers 20 --profile > /dev/null 2>$OUT/prof31.txt
grep -A30 "profile: decode" $OUT/prof31.txt | grep -E "mv|mmq|kernel time"
