# plot_latency.gp - one-way latency against message size (log2 x axis).
#
#   gnuplot -e "data='bench/results/native_latency.csv'" \
#           -e "out='bench/results/native_latency.png'" \
#           [-e "wlat='bench/results/native_rdma_write_latency.csv'"] \
#           [-e "rlat='bench/results/native_rdma_read_latency.csv'"] \
#           [-e "ref='bench/results/fi_shm_pingpong.csv'"] \
#           [-e "ucx='bench/results/ucx_tag.csv'"] bench/plot_latency.gp
#
# data: CSV of vip_send_lat -a --csv (columns bytes, median_us, p99_us, min_us)
# wlat: optional CSV of vip_write_lat -a --csv (RDMA write, RTT/2)
# rlat: optional CSV of vip_read_lat -a --csv (RDMA read: the whole read, not halved)
# ref:  optional CSV with columns bytes, usec_per_xfer (fi_pingpong, shm)
# ucx:  optional CSV of ucx_sweep.sh (columns bytes, lat_p50_us, lat_avg_us:
#       ucx_perftest -t tag_lat, one-way)

if (!exists("data")) data = 'bench/results/native_latency.csv'
if (!exists("out")) out = 'bench/results/native_latency.png'

set terminal pngcairo size 1280,640 font ",11"
set output out
set datafile separator ','
set datafile commentschars '#'
set datafile columnheaders
set title "VIA one-way latency (RTT/2 of a ping-pong); RDMA read: the whole read"
set xlabel "message size [bytes]"
set ylabel "latency [microseconds]"
set logscale x 2
set logscale y 10
set format x "2^{%L}"
set grid xtics ytics mytics
# the legend beside the plot, never over a curve
set key outside right top vertical Left reverse box

s_med = 'data using "bytes":"median_us" with linespoints lw 2 pt 7 lc 1 title "send/receive, median"'
s_p99 = 'data using "bytes":"p99_us" with lines dt 2 lw 2 lc 1 title "send/receive, 99th percentile"'
s_min = 'data using "bytes":"min_us" with lines dt (2,4) lw 2 lc rgb "#404040" title "send/receive, minimum"'
s_w = 'wlat using "bytes":"median_us" with linespoints lw 2 pt 11 title "RDMA write (target polls memory), median"'
s_r = 'rlat using "bytes":"median_us" with linespoints lw 2 pt 13 title "RDMA read (post to completion), median"'
s_ref = 'ref using "bytes":"usec_per_xfer" with linespoints lw 2 pt 5 title "libfabric shm (fi\\_pingpong), mean"'

s_ucx = 'ucx using "bytes":"lat_p50_us" with linespoints lw 2 pt 9 lc 7 title "UCX (ucx\\_perftest -t tag\\_lat), 50th percentile"'
s_ucxm = 'ucx using "bytes":"lat_avg_us" with lines dt 4 lw 2 lc 7 title "UCX tag\\_lat, mean"'

cmd = 'plot ' . s_med . ', ' . s_p99 . ', ' . s_min
if (exists("wlat")) cmd = cmd . ', ' . s_w
if (exists("rlat")) cmd = cmd . ', ' . s_r
if (exists("ref")) cmd = cmd . ', ' . s_ref
if (exists("ucx")) cmd = cmd . ', ' . s_ucx . ', ' . s_ucxm
eval cmd
