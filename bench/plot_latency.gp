# plot_latency.gp - one-way latency against message size (log2 x axis).
#
#   gnuplot -e "data='bench/results/native_latency.csv'" \
#           -e "out='bench/results/native_latency.png'" \
#           [-e "ref='bench/results/fi_shm_pingpong.csv'"] bench/plot_latency.gp
#
# data: CSV of vip_send_lat -a --csv (columns bytes, median_us, p99_us, min_us)
# ref:  optional CSV with columns bytes, usec_per_xfer (fi_pingpong, shm)

if (!exists("data")) data = 'bench/results/native_latency.csv'
if (!exists("out")) out = 'bench/results/native_latency.png'

set terminal pngcairo size 960,600 font ",11"
set output out
set datafile separator ','
set datafile commentschars '#'
set datafile columnheaders
set title "VIA send/receive, one-way latency (RTT/2 of a ping-pong)"
set xlabel "message size [bytes]"
set ylabel "one-way latency [microseconds]"
set logscale x 2
set logscale y 10
set format x "2^{%L}"
set grid xtics ytics mytics
set key top left box opaque

if (exists("ref")) {
    plot data using "bytes":"median_us" with linespoints lw 2 pt 7 title "emulated VIA NIC, median", \
         data using "bytes":"p99_us" with lines dt 2 lw 1 title "emulated VIA NIC, 99th percentile", \
         data using "bytes":"min_us" with lines dt 3 lw 1 title "emulated VIA NIC, minimum", \
         ref using "bytes":"usec_per_xfer" with linespoints lw 2 pt 5 title "libfabric shm (fi\\_pingpong), mean"
} else {
    plot data using "bytes":"median_us" with linespoints lw 2 pt 7 title "emulated VIA NIC, median", \
         data using "bytes":"p99_us" with lines dt 2 lw 1 title "emulated VIA NIC, 99th percentile", \
         data using "bytes":"min_us" with lines dt 3 lw 1 title "emulated VIA NIC, minimum"
}
