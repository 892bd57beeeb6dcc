// Writes tfjs_layers1d.json: for each case, a layer built by
// TensorFlow.js (tfjs-layers 4.22) with set weights, an input and
// TF.js's output, all in Keras's layouts (channels last), beside the nn
// spec (its canonical JSON) that must compute the same.
// Run: NODE_PATH=/tmp/tfjs/node_modules node tfjs_layers1d.js > tfjs_layers1d.json
const tf = require('@tensorflow/tfjs');

let seed = 12345;
function rand() { // a fixed LCG, so that the fixture is reproducible
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}
const normal = n => Array.from({length: n}, () => Math.round((rand() * 4 - 2) * 1000) / 1000);
const size = s => s.reduce((a, b) => a * b, 1);

const cases = [];
function add(name, spec, layer, inShape, x) {
  x = x || normal(2 * size(inShape));
  const xt = tf.tensor(x, [2, ...inShape]);
  layer.apply(xt); // builds the weights
  const weights = {};
  const set = layer.weights.map(w => {
    const short = w.name.split('/').pop();
    const data = normal(size(w.shape));
    weights[short] = {shape: w.shape, data};
    return tf.tensor(data, w.shape);
  });
  layer.setWeights(set);
  const y = layer.apply(xt);
  cases.push({name, spec, input: inShape, x, weights, output: y.shape.slice(1), y: Array.from(y.dataSync())});
}

add('embedding', {type: 'embedding', input_dim: 7, output_dim: 3, embeddings_initializer: {kind: 'random_uniform', minval: -0.05, maxval: 0.05}},
  tf.layers.embedding({inputDim: 7, outputDim: 3}), [5], [0, 6, 2, 2, 5, 1, 3, 4, 6, 0]);
const conv = (f, k, s, pad, d, bias) => ({type: 'conv1d', filters: f, kernel: k, strides: s, padding: pad, dilation: d, use_bias: bias, init: 'he'});
add('conv1d_same_dilated', conv(3, 3, 1, 'same', 2, true), tf.layers.conv1d({filters: 3, kernelSize: 3, padding: 'same', dilationRate: 2}), [9, 2]);
// TF.js does not compute causal padding ("not implemented yet"), nor
// has it ZeroPadding1D: Keras's definition, a valid convolution of the
// input after the dilated span less one of zeros, on an input padded
// here.
{
  const x = normal(2 * 7 * 3), padded = [];
  for (let e = 0; e < 2; e++) padded.push(...Array(2 * 3).fill(0), ...x.slice(e * 21, (e + 1) * 21));
  add('conv1d_causal_dilated_no_bias', conv(2, 2, 1, 'causal', 2, false),
    tf.layers.conv1d({filters: 2, kernelSize: 2, dilationRate: 2, useBias: false}), [9, 3], padded);
  const c = cases[cases.length - 1];
  c.input = [7, 3];
  c.x = x;
}
add('conv1d_valid_stride2', conv(2, 4, 2, 'valid', 1, true), tf.layers.conv1d({filters: 2, kernelSize: 4, strides: 2}), [9, 2]);
add('conv1d_same_stride2_even', conv(2, 4, 2, 'same', 1, true), tf.layers.conv1d({filters: 2, kernelSize: 4, strides: 2, padding: 'same'}), [9, 2]);
add('max_pooling1d_same', {type: 'max_pooling1d', size: 3, strides: 2, padding: 'same'}, tf.layers.maxPooling1d({poolSize: 3, strides: 2, padding: 'same'}), [8, 2]);
add('average_pooling1d_same', {type: 'average_pooling1d', size: 3, strides: 2, padding: 'same'}, tf.layers.averagePooling1d({poolSize: 3, strides: 2, padding: 'same'}), [8, 2]);
add('average_pooling1d_valid', {type: 'average_pooling1d', size: 2, strides: 1, padding: 'valid'}, tf.layers.averagePooling1d({poolSize: 2, strides: 1}), [5, 3]);
add('global_max_pooling1d', {type: 'global_max_pooling1d'}, tf.layers.globalMaxPooling1d(), [6, 3]);
add('global_average_pooling1d', {type: 'global_average_pooling1d'}, tf.layers.globalAveragePooling1d(), [6, 3]);
const ln = eps => ({type: 'layer_normalization', epsilon: eps, center: true, scale: true});
add('layer_normalization_sequence', ln(0.001), tf.layers.layerNormalization(), [5, 4]);
add('layer_normalization_vector', ln(0.00001), tf.layers.layerNormalization({epsilon: 1e-5}), [6]);
add('layer_normalization_image', ln(0.001), tf.layers.layerNormalization(), [3, 2, 4]);
add('prelu_sequence', {type: 'prelu', shared_axes: [1]}, tf.layers.prelu({sharedAxes: [1]}), [5, 3]);
add('prelu_image', {type: 'prelu', shared_axes: [1, 2]}, tf.layers.prelu({sharedAxes: [1, 2]}), [3, 2, 3]);
add('prelu_vector', {type: 'prelu'}, tf.layers.prelu(), [4]);
add('leaky_relu', {type: 'leaky_relu', alpha: 0.1}, tf.layers.leakyReLU({alpha: 0.1}), [8]);
add('elu', {type: 'elu', alpha: 1}, tf.layers.elu(), [8]);
const grid = Array.from({length: 36}, (_, i) => (i - 18) / 4); // −4.5 … 4.25
for (const [tfjs, fn] of [['elu', 'elu'], ['selu', 'selu'], ['gelu', 'gelu'], ['gelu_new', 'gelu_tanh'], ['swish', 'swish'],
  ['softplus', 'softplus'], ['softsign', 'softsign'], ['hardSigmoid', 'hard_sigmoid_tf']]) {
  add('activation_' + fn, {type: 'activation', fn}, tf.layers.activation({activation: tfjs}), [18], grid);
}
console.log(JSON.stringify({generatedBy: 'tfjs-layers ' + tf.version_layers, cases}));
