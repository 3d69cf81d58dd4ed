# Plot of the CPU benchmark CSV (written by devtap-bench-cpu --csv): records/s and GB/s against
# payload size, one line per pipeline. gnuplot -e "csv='docs/bench-cpu.csv'; png='docs/bench-cpu.png'" bench/plot-cpu.gp
if (!exists("csv")) csv = 'docs/bench-cpu.csv'
if (!exists("png")) png = 'docs/bench-cpu.png'

set terminal pngcairo size 1400,560 font ",11"
set output png
set datafile separator ','
set logscale x 2
set xtics ("16 B" 16, "256 B" 256, "4 KiB" 4096, "64 KiB" 65536)
set xrange [11:90000]
set grid
set key top right font ",10"

# Rows of one implementation (and producer count) from the CSV; columns 2 (bytes), 4 (records/s), 5 (GB/s).
rows(impl, p) = sprintf("< awk -F, '$1==\"%s\" && $3==%d' %s", impl, p, csv)

set multiplot layout 1,2 title "devtap vs hand-built pipelines: end to end, 1 MiB in flight, consumer reads every byte (median of runs)"

set title "records per second"
set logscale y 10
set ylabel "records/s"
set format y "%.0s%c"
plot rows('devtap', 1)         using 2:4 with linespoints lw 3 pt 7 lc rgb '#d62728' title 'devtap (1 producer)', \
     rows('devtap', 4)         using 2:4 with linespoints lw 2 pt 6 dt 2 lc rgb '#d62728' title 'devtap (4 producers)', \
     rows('boost-spsc', 1)     using 2:4 with linespoints lw 2 pt 5 lc rgb '#1f77b4' title 'boost spsc\_queue', \
     rows('moodycamel-rwq', 1) using 2:4 with linespoints lw 2 pt 9 lc rgb '#2ca02c' title 'moodycamel RWQ', \
     rows('moodycamel-cq', 2)  using 2:4 with linespoints lw 2 pt 11 lc rgb '#9467bd' title 'moodycamel CQ (2 producers)', \
     rows('mutex-deque', 1)    using 2:4 with linespoints lw 2 pt 13 lc rgb '#8c564b' title 'mutex+condvar deque', \
     rows('ref-copy-read', 1)  using 2:4 with linespoints lw 1 pt 1 dt 3 lc rgb 'black' title 'ref: 1 thread copy+read', \
     rows('ref-memcpy', 1)     using 2:4 with linespoints lw 1 pt 2 dt 4 lc rgb 'gray40' title 'ref: 1 thread memcpy'

set title "payload GB/s"
set logscale y 10
set ylabel "GB/s"
set format y "%g"
plot rows('devtap', 1)         using 2:5 with linespoints lw 3 pt 7 lc rgb '#d62728' notitle, \
     rows('devtap', 4)         using 2:5 with linespoints lw 2 pt 6 dt 2 lc rgb '#d62728' notitle, \
     rows('boost-spsc', 1)     using 2:5 with linespoints lw 2 pt 5 lc rgb '#1f77b4' notitle, \
     rows('moodycamel-rwq', 1) using 2:5 with linespoints lw 2 pt 9 lc rgb '#2ca02c' notitle, \
     rows('moodycamel-cq', 2)  using 2:5 with linespoints lw 2 pt 11 lc rgb '#9467bd' notitle, \
     rows('mutex-deque', 1)    using 2:5 with linespoints lw 2 pt 13 lc rgb '#8c564b' notitle, \
     rows('ref-copy-read', 1)  using 2:5 with linespoints lw 1 pt 1 dt 3 lc rgb 'black' notitle, \
     rows('ref-memcpy', 1)     using 2:5 with linespoints lw 1 pt 2 dt 4 lc rgb 'gray40' notitle

unset multiplot
