# The fixed busybox shell script of the `shell_script` benchmark (bench/linux/lbench.c), the same
# on both systems: lbench runs `/bin/busybox sh <dir>/script.sh <dir>` with its output to
# /dev/null, where <dir> holds the benchmark files. What a small shell script does: a loop of
# arithmetic, a pipeline of applets, command substitution, a subshell, a case, a function.
dir=$1
n=0
while [ $n -lt 20 ]; do
    n=$((n + 1))
done
for w in pear apple fig apple pear apple; do
    echo "$w"
done | sort | uniq -c | sort -rn
bytes=$(cat "$dir/small" | wc -c)
echo "small: $bytes bytes"
count() {
    ls "$1" | wc -l
}
echo "files: $(count "$dir")"
(cd "$dir" && head -c 16 small | od -An -tx1)
case $bytes in
    *512) echo "as expected" ;;
    *) echo "unexpected"; exit 1 ;;
esac
grep -c . "$dir/script.sh" > /dev/null
echo "done after $n rounds"
