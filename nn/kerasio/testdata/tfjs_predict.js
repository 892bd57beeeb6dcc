// tfjs_predict.js MODEL_JSON INPUTS_BIN SHAPE OUT_BIN [MODEL_JSON ...]: loads a TF.js
// layers model with tf.loadLayersModel (its model.json read as a file
// handler would, the weight files beside it through the manifest's
// paths), runs model.predict on the float32 inputs of SHAPE (a JSON list,
// N first, channels last) and writes the outputs as float32 to OUT_BIN,
// their shape on stdout; each further group of four arguments is another
// model, in the same process (loading TF.js once is most of a test's
// time). Run by nn/kerasio's tests on models meshtrain exported.
const tf = require('@tensorflow/tfjs');
const fs = require('fs');
const path = require('path');

(async () => {
  await tf.setBackend('cpu');
  const args = process.argv.slice(2);
  if (args.length === 0 || args.length % 4 !== 0) throw new Error('want groups of MODEL_JSON INPUTS_BIN SHAPE OUT_BIN');
  for (let i = 0; i < args.length; i += 4) {
    const [modelPath, inputsPath, shapeJSON, outPath] = args.slice(i, i + 4);
    const dir = path.dirname(modelPath);
    const handler = {
      load: async () => tf.io.getModelArtifactsForJSON(JSON.parse(fs.readFileSync(modelPath, 'utf8')), async (manifest) => {
        const specs = [];
        const buffers = [];
        for (const group of manifest) {
          specs.push(...group.weights);
          for (const p of group.paths) buffers.push(fs.readFileSync(path.join(dir, p)));
        }
        const all = Buffer.concat(buffers);
        return [specs, all.buffer.slice(all.byteOffset, all.byteOffset + all.length)];
      }),
    };
    const model = await tf.loadLayersModel(handler);
    const shape = JSON.parse(shapeJSON);
    const b = fs.readFileSync(inputsPath);
    const x = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
    const y = model.predict(tf.tensor(x, shape));
    fs.writeFileSync(outPath, Buffer.from(new Float32Array(await y.data()).buffer));
    console.log(JSON.stringify(y.shape));
  }
})().catch((e) => { console.error(e); process.exit(1); });
