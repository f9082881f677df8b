# plot_paced.gp - a paced profile: latency and bandwidth against message
# size, one curve per extension mode and one for RDMA write (log2 x axis).
#
#   gnuplot -e "prof='sbus'" -e "dir='bench/results'" bench/plot_paced.gp
#
# reads  dir/PROF_{standard,descriptorless,merged}_{latency,bandwidth}.csv
#        dir/PROF_rdma_write_{latency,bandwidth}.csv
#        dir/PROF_model_bw.csv, dir/PROF_model_rdma_bw.csv (bytes,Mbit_per_s: what
#        the model predicts for sends and for RDMA writes)
#        dir/PROF_model_lat.csv (bytes and the model's one-way latency of each mode
#        and of RDMA write, microseconds)
# Each measured curve has its model beside it: the same colour, dashed.
# writes dir/PROF_latency.png, dir/PROF_bandwidth.png

if (!exists("prof")) prof = 'sbus'
if (!exists("dir")) dir = 'bench/results'
f(mode, kind) = sprintf("%s/%s_%s_%s.csv", dir, prof, mode, kind)

set terminal pngcairo size 1280,640 font ",11"
set datafile separator ','
set datafile commentschars '#'
set datafile columnheaders
set logscale x 2
set format x "2^{%L}"
set xlabel "message size [bytes]"
set grid xtics ytics mytics
# the legend beside the plot, never over a curve
set key outside right top vertical Left reverse box

set output sprintf("%s/%s_latency.png", dir, prof)
set title sprintf("profile %s: one-way latency (RTT/2 of a ping-pong), median", prof)
set ylabel "one-way latency [microseconds]"
set logscale y 10
m = sprintf("%s/%s_model_lat.csv", dir, prof)
plot f("standard", "latency") using "bytes":"median_us" with linespoints lw 2 pt 7 lc 1 title "standard descriptors", \
     m using "bytes":"standard" with lines dt (6,4) lw 3 lc 1 title "  its model", \
     f("descriptorless", "latency") using "bytes":"median_us" with linespoints lw 2 pt 5 lc 2 title "descriptorless messages", \
     m using "bytes":"descriptorless" with lines dt (6,4) lw 3 lc 2 title "  its model", \
     f("merged", "latency") using "bytes":"median_us" with linespoints lw 2 pt 9 lc 3 title "merged descriptors", \
     m using "bytes":"merged" with lines dt (6,4) lw 3 lc 3 title "  its model", \
     f("rdma_write", "latency") using "bytes":"median_us" with linespoints lw 2 pt 11 lc 4 title "RDMA write (target polls memory)", \
     m using "bytes":"rdma_write" with lines dt (6,4) lw 3 lc 4 title "  its model"

set output sprintf("%s/%s_bandwidth.png", dir, prof)
set title sprintf("profile %s: streaming bandwidth (a window of sends in flight)", prof)
set ylabel "bandwidth [Mbit/s]"
# log y too: sizes span decades, and a linear axis flattens the small ones
set logscale y 10
plot f("standard", "bandwidth") using "bytes":"Mbit_per_s" with linespoints lw 2 pt 7 lc 1 title "standard descriptors", \
     sprintf("%s/%s_model_bw.csv", dir, prof) using "bytes":"Mbit_per_s" with lines dt (6,4) lw 3 lc 1 title "  its model", \
     f("descriptorless", "bandwidth") using "bytes":"Mbit_per_s" with linespoints lw 2 pt 5 lc 2 title "descriptorless messages", \
     f("merged", "bandwidth") using "bytes":"Mbit_per_s" with linespoints lw 2 pt 9 lc 3 title "merged descriptors", \
     f("rdma_write", "bandwidth") using "bytes":"Mbit_per_s" with linespoints lw 2 pt 11 lc 4 title "RDMA write", \
     sprintf("%s/%s_model_rdma_bw.csv", dir, prof) using "bytes":"Mbit_per_s" with lines dt (6,4) lw 3 lc 4 title "  its model"
