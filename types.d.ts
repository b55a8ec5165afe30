// WGSL sources are imported as strings: by tools/node-loader.js in Node and by the wgsl plugin in Vite.
declare module '*.wgsl' {
  const source: string;
  export default source;
}
