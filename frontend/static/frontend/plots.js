// Draw every figure the `plot` tag placed on the page (JSON in a script element beside its div).
// A file, not an inline script: the Content-Security-Policy allows scripts from the site only.
document.querySelectorAll("div.plot").forEach(function (div) {
  var figure = JSON.parse(document.getElementById(div.dataset.figure).textContent);
  Plotly.newPlot(div, figure.data, figure.layout, {responsive: true, displaylogo: false});
});
