// The parts of Apache ECharts the experiment page uses (parallel coordinates, coloured by a visual map, with a
// tooltip), bundled by build-echarts.sh into static/vendor/echarts-parallel.min.js as the global `echarts`.
import * as echarts from "echarts/core";
import { ParallelChart } from "echarts/charts";
import { ParallelComponent, TooltipComponent, VisualMapComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([ParallelChart, ParallelComponent, TooltipComponent, VisualMapComponent, CanvasRenderer]);
window.echarts = echarts;
