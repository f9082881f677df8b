# plot_bandwidth.gp - bandwidth against message size (log2 x axis).
#
#   gnuplot -e "data='bench/results/native_bandwidth.csv'" \
#           -e "out='bench/results/native_bandwidth.png'" \
#           [-e "lat='bench/results/native_latency.csv'"] \
#           [-e "wbw='bench/results/native_rdma_write_bandwidth.csv'"] \
#           [-e "ref='bench/results/fi_shm_pingpong.csv'"] \
#           [-e "ucx='bench/results/ucx_tag.csv'"] bench/plot_bandwidth.gp
#
# data: CSV of vip_send_bw -a --csv (columns bytes, MB_per_s): streaming
# lat:  optional CSV of vip_send_lat -a --csv: ping-pong bandwidth is
#       bytes / one-way latency
# wbw:  optional CSV of vip_write_bw -a --csv: RDMA write, streaming
# ref:  optional CSV with columns bytes, MB_per_s (fi_pingpong, shm: ping-pong)
# ucx:  optional CSV of ucx_sweep.sh (columns bytes, MB_per_s: ucx_perftest
#       -t tag_bw, streaming, whole run)
# MB = 10^6 bytes.

if (!exists("data")) data = 'bench/results/native_bandwidth.csv'
if (!exists("out")) out = 'bench/results/native_bandwidth.png'

set terminal pngcairo size 1280,640 font ",11"
set output out
set datafile separator ','
set datafile commentschars '#'
set datafile columnheaders
set title "VIA bandwidth: send/receive and RDMA write (MB = 10^6 bytes)"
set xlabel "message size [bytes]"
set ylabel "bandwidth [MB/s]"
set logscale x 2
set logscale y 10
set format x "2^{%L}"
set grid xtics ytics mytics
# the legend beside the plot, never over a curve
set key outside right top vertical Left reverse box

s_stream = 'data using "bytes":"MB_per_s" with linespoints lw 2 pt 7 title "emulated VIA NIC, streaming (vip\\_send\\_bw)"'
s_pp = 'lat using "bytes":(column("bytes") / column("median_us")) with linespoints lw 1 pt 6 title "emulated VIA NIC, ping-pong (size / median one-way latency)"'
s_w = 'wbw using "bytes":"MB_per_s" with linespoints lw 2 pt 11 title "emulated VIA NIC, RDMA write, streaming (vip\\_write\\_bw)"'
s_ref = 'ref using "bytes":"MB_per_s" with linespoints lw 2 pt 5 title "libfabric shm, ping-pong (fi\\_pingpong)"'

s_ucx = 'ucx using "bytes":"MB_per_s" with linespoints lw 2 pt 9 title "UCX, streaming (ucx\\_perftest -t tag\\_bw)"'

cmd = 'plot ' . s_stream
if (exists("wbw")) cmd = cmd . ', ' . s_w
if (exists("lat")) cmd = cmd . ', ' . s_pp
if (exists("ref")) cmd = cmd . ', ' . s_ref
if (exists("ucx")) cmd = cmd . ', ' . s_ucx
eval cmd
