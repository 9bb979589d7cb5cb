import{a as e,b as r}from"./chunk-FB4HB4A2.mjs";import"./chunk-MWUZ53VY.mjs";import"./chunk-V3YWWTDH.mjs";export{e as CynefinModule,r as createCynefinServices};
